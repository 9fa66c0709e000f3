#!/usr/bin/env bash
# The gate trips on a planted 2x regression and holds without it. Re-gates the
# results of the real gate run (bench.gate.host): unchanged it must pass; with
# every `standalone` sample halved it must exit 3 and name each host floor of
# the standalone configuration, and no other floor.
# Usage: planted_regression.sh STANDIN RESULTS_JSON FLOORS WORK
set -uo pipefail
standin=$1 results=$2 floors=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail=0

"$standin" bench --from "$results" --gate "$floors" --out "$work/unchanged" >"$work/unchanged.out" 2>&1
rc=$?
grep '^gate:' "$work/unchanged.out"
[[ $rc == 0 ]] || { echo "unchanged results: gate exit $rc, expected 0"; fail=1; }

python3 - "$results" "$work/halved.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n = 0
for r in j["runs"]:
    if r["config"] == "standalone":
        r["avg_ts"] /= 2
        r["samples_ts"] = [x / 2 for x in r["samples_ts"]]
        n += 1
assert n > 0, "no standalone run to halve"
json.dump(j, open(sys.argv[2], "w"))
PY
"$standin" bench --from "$work/halved.json" --gate "$floors" --out "$work/halved" >"$work/halved.out" 2>&1
rc=$?
grep '^gate:' "$work/halved.out"
[[ $rc == 3 ]] || { echo "halved standalone: gate exit $rc, expected 3"; fail=1; }
expected=$(python3 -c '
import json, sys
for f in json.load(open(sys.argv[1]))["floors"]:
    if f["kind"] == "host" and f["config"] == "standalone": print(f["name"])' "$floors")
[[ -n $expected ]] || { echo "no host floor for standalone in $floors"; fail=1; }
for name in $expected; do
    grep -q "^gate: BROKEN  $name: " "$work/halved.out" || { echo "floor $name was not named as broken"; fail=1; }
done
others=$(grep '^gate: BROKEN' "$work/halved.out" | grep -v ' standalone ')
[[ -z $others ]] || { echo "other floors broke too:"; echo "$others"; fail=1; }
[[ $fail == 0 ]] && echo "planted regression: ok"
exit $fail
