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
# Failing cases (not the closing "Backend NAME: FAIL" line).
failed=$(grep -E ': FAIL$' "$log" | grep -cvE '^ *Backend ' || true)
summary=$(grep -E '[0-9]+/[0-9]+ tests passed' "$log" | tail -1 | sed 's/^ *//')

# TOPK_MOE compares its selected experts (the [VIEW] of an ARGSORT) as a set.
# Where two experts tie at the k-th place - equal probabilities, which random
# logits a few ulps apart can give - ggml leaves open which one is taken:
# ggml-cpu's sort and standin's (the lower index first) may take different
# ones, and the experts' node fails while the weights agree. Only such a case
# (the [VIEW] node alone failing) is run again, with fresh random inputs, at
# most twice; it counts as passing when a rerun passes, and is reported. Any
# other failure, or one that fails its reruns, stands.
ties=0
while IFS= read -r line; do
    case_=$(sed -E 's/^\[VIEW\] ERR = [^ ]+ > [^ ]+ +(TOPK_MOE\(.*\)): FAIL$/\1/' <<<"$line")
    # -p matches a case's parameters (the text in its parentheses): the whole of them, escaped.
    pattern="^$(sed -E -e 's/^TOPK_MOE\((.*)\)$/\1/' -e 's/[][().*+?^$|\\{}]/\\&/g' <<<"$case_")\$"
    for try in 1 2; do
        again=$("$tbo" test -b "$device" -o TOPK_MOE -p "$pattern" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g')
        if grep -qE '^ +1/1 tests passed' <<<"$again"; then
            echo "tie rerun $try passed: $case_" | tee -a "$log"
            ties=$((ties + 1))
            break
        fi
        echo "tie rerun $try failed: $case_" >>"$log"
    done
done < <(grep -E '^\[VIEW\] ERR = .* TOPK_MOE\(.*\): FAIL$' "$log")
tie_note=""
if (( ties > 0 )); then
    failed=$((failed - ties))
    passed=$((passed + ties))
    tie_note=", $ties TOPK_MOE tie reruns passed"
    # The run's exit code counted them: clear it only when the run finished
    # and the reruns account for every case it did not pass.
    read -r ok total < <(sed -E 's#^([0-9]+)/([0-9]+) tests passed.*#\1 \2#' <<<"$summary")
    if [[ $failed == 0 && -n ${total:-} && $((total - ok)) == "$ties" ]]; then rc=0; fi
fi
echo "test-backend-ops test -b $device: exit $rc, $passed cases OK, $failed FAIL ($summary$tie_note); log: $log"
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
