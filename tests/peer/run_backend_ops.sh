#!/usr/bin/env bash
# Runs test-backend-ops (mode test) on one standin device and checks the result:
# exit 0, no failing case, and at least one passing case. Prints the count of
# passing cases per op. Exits 77 (skipped) when the device does not exist.
# Usage: run_backend_ops.sh TEST_BACKEND_OPS PLUGIN DEVICE LOG [extra test-backend-ops args]
set -uo pipefail
tbo=$1 plugin=$2 device=$3 log=$4
shift 4
export GGML_BACKEND_PATH=$plugin

# test-backend-ops prints "Backend i/n: NAME" for every device it knows.
if ! "$tbo" support -o NONE 2>/dev/null | grep -q "^Backend [0-9]*/[0-9]*: $device\$"; then
    echo "skipped: no $device device on this machine"
    exit 77
fi

"$tbo" test -b "$device" "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' >"$log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^  [A-Z_0-9]+\(.*\): OK$' "$log" || true)
failed=$(grep -cE ': FAIL$' "$log" || true)
summary=$(grep -E '[0-9]+/[0-9]+ tests passed' "$log" | tail -1 | sed 's/^ *//')
echo "test-backend-ops test -b $device: exit $rc, $passed cases OK, $failed FAIL ($summary); log: $log"
grep -E ': FAIL$' "$log" | head -20
if [[ $rc != 0 || $failed != 0 ]]; then
    tail -20 "$log"
    exit 1
fi
echo "passing cases per op:"
grep -E '^  [A-Z_0-9]+\(.*\): OK$' "$log" | sed -E 's/^ *([A-Z_0-9]+)\(.*/\1/' | sort | uniq -c | sort -rn
if [[ $passed == 0 ]]; then
    echo "no case ran: the device claims nothing?"
    exit 1
fi
