#!/usr/bin/env bash
# The gate trips on a planted regression and holds without it. Re-gates the
# results of a bench run: unchanged it must pass; with every `standalone`
# sample divided by DIVISOR it must exit 3 and name each floor of KIND for the
# standalone configuration whose cell (model and test) the results measured,
# and no other floor.
#   host (default): the real gate run of CI (bench.gate.host), divided by 4,
#     not 2: on 2 shared cores the real ratios have run from 0.9 up to 1.38
#     (tg64), and half of 1.38 is still above the 0.65 floor.
#   cuda: a committed H200 report (results/h200/bench-report, or
#     bench-report-kquant), divided by 4/3: a 25% slower standalone must break
#     every GPU floor of the models it measured.
# Usage: planted_regression.sh STANDIN RESULTS_JSON FLOORS WORK [KIND] [DIVISOR]
set -uo pipefail
standin=$1 results=$2 floors=$3 work=$4 kind=${5:-host} divisor=${6:-4}
rm -rf "$work" && mkdir -p "$work"
fail=0

"$standin" bench --from "$results" --gate "$floors" --out "$work/unchanged" >"$work/unchanged.out" 2>&1
rc=$?
grep '^gate:' "$work/unchanged.out"
[[ $rc == 0 ]] || { echo "unchanged results: gate exit $rc, expected 0"; fail=1; }

python3 - "$results" "$work/slowed.json" "$divisor" <<'PY'
import json, sys
from fractions import Fraction
j = json.load(open(sys.argv[1]))
k = float(Fraction(sys.argv[3]))  # a number or a fraction such as 4/3
n = 0
for r in j["runs"]:
    if r["config"] == "standalone" and "error" not in r:  # a failed run has no figure to slow
        r["avg_ts"] /= k
        r["samples_ts"] = [x / k for x in r["samples_ts"]]
        n += 1
assert n > 0, "no standalone run to slow down"
json.dump(j, open(sys.argv[2], "w"))
PY
"$standin" bench --from "$work/slowed.json" --gate "$floors" --out "$work/slowed" >"$work/slowed.out" 2>&1
rc=$?
grep '^gate:' "$work/slowed.out"
[[ $rc == 3 ]] || { echo "slowed standalone: gate exit $rc, expected 3"; fail=1; }
expected=$(python3 -c '
import json, sys
cells = {(r["model"], r["test"]) for r in json.load(open(sys.argv[3]))["summary"]}
for f in json.load(open(sys.argv[1]))["floors"]:
    if f["kind"] == sys.argv[2] and f["config"] == "standalone" and (f["model"], f["test"]) in cells: print(f["name"])' \
    "$floors" "$kind" "$results")
[[ -n $expected ]] || { echo "no $kind floor for standalone in $floors"; fail=1; }
for name in $expected; do
    grep -q "^gate: BROKEN  $name: " "$work/slowed.out" || { echo "floor $name was not named as broken"; fail=1; }
done
others=$(grep '^gate: BROKEN' "$work/slowed.out" | grep -v ' standalone ')
[[ -z $others ]] || { echo "other floors broke too:"; echo "$others"; fail=1; }
[[ $fail == 0 ]] && echo "planted regression: ok"
exit $fail
