#!/usr/bin/env bash
# Runs llama.cpp's test-llama-archs (pinned tree) over standin devices and
# checks its table: every architecture's random model, on each device (layer
# split) and on ggml's meta device (tensor split), against ggml-cpu's logits
# (NMSE <= 1e-4, checked by the tool itself) and a save/load roundtrip.
# Fails on a nonzero exit (a FAIL row, or an abort or crash, which leaves the
# table cut short), on any FAIL, or when a device has no OK row. Prints the
# OK / SKIP / FAIL counts per device and split.
# Usage: run_llama_archs.sh TEST_LLAMA_ARCHS PRELOAD_LIB PLUGIN LOG [test-llama-archs args]
set -uo pipefail
tool=$1 preload=$2 plugin=$3 log=$4
shift 4
[[ -f $preload ]] || { echo "preload library $preload not found"; exit 1; }
export GGML_BACKEND_PATH=$plugin
LD_PRELOAD=$preload "$tool" "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' >"$log"
rc=${PIPESTATUS[0]}

# Rows: |arch|device|config|status (nmse)|roundtrip|. Device "Meta" is the
# tensor split over every non-CPU device; the others are layer split.
summary=$(awk -F'|' 'NF >= 6 && $2 !~ /Model arch|^-+$/ {
        dev = $3; gsub(/^ +| +$/, "", dev);
        st = $5; gsub(/^ +/, "", st); split(st, s, " ");
        rt = $6; gsub(/ /, "", rt);
        split_mode = (dev == "Meta") ? "tensor" : "layer";
        key = dev " [" split_mode "]";
        n[key, s[1]]++; keys[key] = 1;
        if (rt == "FAIL") rtfail[key]++;
    }
    END {
        for (k in keys) printf "%s: OK %d, SKIP %d, FAIL %d, roundtrip FAIL %d\n",
            k, n[k, "OK"], n[k, "SKIP"], n[k, "FAIL"], rtfail[k];
    }' "$log" | sort)
echo "test-llama-archs: exit $rc; log: $log"
echo "$summary"
grep -E '\| *FAIL' "$log" | head -20
if [[ $rc != 0 ]]; then
    echo "test-llama-archs exited with $rc; last lines:"
    tail -15 "$log"
    exit 1
fi
if grep -qE '\| *FAIL' "$log"; then
    exit 1
fi
# Every standin device and the meta device must have passed something.
for dev in standin Meta; do
    if ! echo "$summary" | grep -E "^[^:]*$dev[^:]*: OK [1-9]" >/dev/null; then
        echo "no OK row for $dev: the device did not take part"
        exit 1
    fi
done
echo "all architectures OK"
