#!/usr/bin/env bash
# `standin bench --batched` end to end on the host kind, without llama.cpp's
# llama-batched-bench (the pinned CPU build has none): a fake one prints its
# table in the pinned tool's printf format, standalone 1.2x as fast as real,
# and dies of SIGSEGV as interposed-all, and says (as real) which ggml-cpu it
# loaded. Checks the commands it got, the report notes, the report
# rows, the gate (a floor at the achieved ratio holds, one on the crashed
# configuration breaks: exit 3), and that the crash is a failed row (re-reported
# without a gate: exit 1), never a figure.
# Usage: batched_fake.sh STANDIN WORK
set -uo pipefail
standin=$1 work=$2
rm -rf "$work" && mkdir -p "$work/bin"
fail=0
echo "not read by the fake tool" >"$work/m.gguf"

cat >"$work/bin/llama-batched-bench" <<'FAKE'
#!/usr/bin/env bash
echo "${GGML_STANDIN_MODE:-}|${GGML_STANDIN_LOCAL_OPS:-}|${LLAMA_ARG_THREADS:-unset}|$*" >>"$FAKE_BATCHED_LOG"
[[ ${GGML_STANDIN_LOCAL_OPS:-} == all ]] && kill -SEGV $$
[[ -z ${GGML_STANDIN_MODE:-}${GGML_STANDIN_LOCAL_OPS:-} ]] && echo "load_backend: loaded CPU backend from /fake/libggml-cpu-fakevariant.so" >&2
npp=0 ntg=0 npl= fa=
while [[ $# -gt 0 ]]; do
    case $1 in
        -npp) npp=$2 ;; -ntg) ntg=$2 ;; -npl) npl=$2 ;; -fa) fa=$2 ;;
    esac
    shift
done
k=10; [[ ${GGML_STANDIN_MODE:-} == standalone ]] && k=12
printf "\nllama_batched_bench: n_kv_max = 1024, n_batch = 2048, n_ubatch = 512, flash_attn = %d, is_pp_shared = 0, is_tg_separate = 0, n_gpu_layers = 99, n_threads = 1, n_threads_batch = 1\n\n" "$([[ $fa == on ]] && echo 1 || echo 0)"
printf "|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n" "PP" "TG" "B" "N_KV" "T_PP s" "S_PP t/s" "T_TG s" "S_TG t/s" "T s" "S t/s"
printf "|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n" "------" "------" "----" "------" "--------" "--------" "--------" "--------" "--------" "--------"
for b in ${npl//,/ }; do
    printf "|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n" "$npp" "$ntg" "$b" \
        $((b * (npp + ntg))) 0.1 $((100 * k * b)) 0.2 $((10 * k * b)) 0.3 $((50 * k * b))
done
FAKE
chmod +x "$work/bin/llama-batched-bench"
export FAKE_BATCHED_LOG=$work/calls.log
cat >"$work/floors.json" <<'EOF'
{"floors": [
  {"name": "standalone-b4-tg", "kind": "host", "model": "m", "test": "batchedB4-tg16", "fa": 1, "config": "standalone", "min_ratio": 1.15},
  {"name": "all-b4-tg", "kind": "host", "model": "m", "test": "batchedB4-tg16", "fa": 1, "config": "interposed-all", "min_ratio": 0.5}]}
EOF

LLAMA_ARG_THREADS=7 "$standin" bench -m "$work/m.gguf" -p 0 -n 0 --fa 1 -r 2 -t 1 \
    --configs real,standalone,interposed-all --batched 1,4 --batched-npp 64 --batched-ntg 16 \
    --llama-batched-bench "$work/bin/llama-batched-bench" --gate "$work/floors.json" \
    --out "$work/out" >"$work/bench.out" 2>&1
rc=$?
[[ $rc == 3 ]] || { echo "bench with a crashing configuration and its floor: exit $rc, expected 3"; fail=1; }
expect() {  # FILE REGEX WHAT
    grep -qE -- "$2" "$1" || { echo "missing in $1: $3"; fail=1; }
}
expect "$work/calls.log" "^standalone\|\|unset\|-m $work/m.gguf -dev STANDIN_HOST0 -ngl 99 -fa on -c 512 -b 2048 -ub 512 -npp 64 -ntg 16 -npl 1,4 -t 1$" \
    "standalone's command, without the caller's LLAMA_ARG_THREADS"
expect "$work/calls.log" "^\|\|unset\|-m .* -dev none -fa on " "real's command"
expect "$work/calls.log" "^\|all\|unset\|" "interposed-all ran (from the app folder)"
expect "$work/out/bench.md" "\| m \| batchedB4-tg16 \| 1 \| 400.0 ± 0.000 \| 480.0 ± 0.000 \(1.20× \[1.20\]\) \| FAILED \|" \
    "the B=4 tg row: real, standalone at 1.2x, interposed-all FAILED"
expect "$work/out/bench.md" "\| m \| batchedB1-pp64 \| 1 \| 1000 ± 0.000 \| 1200 ± 0.000" "the B=1 pp row"
expect "$work/out/bench.md" "- interposed-all m batchedB4-tg16 fa1: 2 of 2 \(llama-batched-bench killed by signal 11" \
    "the failed runs' list"
expect "$work/out/bench.md" "batchedB<B>-pp64.*-c 512 -b 2048 -ub 512" "the note on how the batched tests ran"
expect "$work/out/bench.md" '^- `real` loaded its CPU backend from /fake/libggml-cpu-fakevariant.so\.$' \
    "the note naming the library the real runs loaded"
expect "$work/bench.out" "gate: held    standalone-b4-tg: " "the floor at the achieved ratio holds"
expect "$work/bench.out" "gate: BROKEN  all-b4-tg: .*failed in 2 of 2 runs" "the floor on the crashed configuration breaks"
[[ -e $work/out/work/app-host ]] && { echo "app folder left behind"; fail=1; }
if command -v gnuplot >/dev/null; then
    [[ -s $work/out/bench.png ]] || { echo "no bench.png with a configuration that has no figure"; fail=1; }
fi

"$standin" bench --from "$work/out/bench.json" --out "$work/again" >"$work/again.out" 2>&1
rc=$?
[[ $rc == 1 ]] || { echo "re-report of results with failed tests: exit $rc, expected 1"; fail=1; }
expect "$work/again.out" "8 test\(s\) failed" "the failed tests counted again (2 repetitions x 2 B x pp, tg)"
cmp -s <(grep -v '^- date' "$work/out/bench.md") <(grep -v '^- date' "$work/again/bench.md") ||
    { echo "the re-report differs from the report"; fail=1; }

"$standin" bench -m "$work/m.gguf" -p 0 -n 0 --batched 1,x --llama-batched-bench "$work/bin/llama-batched-bench" \
    --out "$work/bad" >"$work/bad.out" 2>&1
rc=$?
[[ $rc == 2 ]] || { echo "--batched 1,x: exit $rc, expected 2"; fail=1; }
expect "$work/bad.out" "bench: --batched: 'x' is not a whole number" "the bad list named"
"$standin" bench -m "$work/m.gguf" -p 0 -n 0 --batched 2 --llama-bench "$work/nowhere/llama-bench" \
    --out "$work/bad" >"$work/missing.out" 2>&1
rc=$?
[[ $rc == 2 ]] || { echo "no llama-batched-bench: exit $rc, expected 2"; fail=1; }
expect "$work/missing.out" "no llama-batched-bench at $work/nowhere/llama-batched-bench" "the missing tool named"

[[ $fail == 0 ]] && echo "batched end to end: ok" || { echo "--- bench output:"; cat "$work/bench.out"; }
exit $fail
