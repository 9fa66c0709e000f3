#!/usr/bin/env bash
# node-llama-cpp, unmodified, chatting through standin (tests/app/nlc_chat.mjs:
# getLlama, loadModel, LlamaChatSession), once per mode:
#   plain    node-llama-cpp alone, on its prebuilt ggml-cpu;
#   path     GGML_BACKEND_PATH=libggml-standin.so, every layer on
#            STANDIN_HOST0 (gpuLayers "max"), and none (gpuLayers 0): then
#            the weights, the graph splits and the text are the plain run's
#            (Note [host device placement] in glue/device.cpp);
#   replace  the plugin dropped in as libggml-cpu-standin.so beside the
#            prebuilt libggml-cpu-*.so, with GGML_STANDIN_LOCAL_OPS none and all.
# Each must produce tokens, log the line saying which mode took effect, and
# end with a clean audit; replace mode's text must equal the plain run's.
#
# The application folder is a copy of the installed npm project (hard links
# where the file system allows), so the cache stays as npm left it and runs
# never see each other's plugin file. Its node_modules must be the same after
# the runs as before, apart from the plugin file this script drops in and
# removes again.
# One thread by default: ggml-cpu's workers spin at a barrier between ops, and
# on a machine whose cores are taken by other work two of them can take
# seconds per token; the rates printed at the end compare the modes, one run.
# Usage: run_nlc.sh NODE_APP PLUGIN MODEL WORKDIR [MAX_TOKENS [THREADS]]
set -uo pipefail
napp=$1 plugin=$2 model=$3 work=$4 max_tokens=${5:-16} threads=${6:-1}
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)

unset GGML_BACKEND_PATH GGML_STANDIN_REAL GGML_STANDIN_MODE GGML_STANDIN_LOCAL_OPS LD_PRELOAD LD_LIBRARY_PATH
[[ -f $model ]] || { echo "no model at '$model'"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
app=$work/app
mkdir -p "$app"
cp "$napp/package.json" "$app/"
cp -al "$napp/node_modules" "$app/" 2>/dev/null || cp -a "$napp/node_modules" "$app/"
bins=$app/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
dropped=$bins/libggml-cpu-standin.so
[[ -d $bins ]] || { echo "no prebuilt binaries in $bins"; exit 1; }
trap 'rm -f "$dropped"' EXIT

# Every entry of node_modules with its type and size, and every file's content.
tree_sum() {
    (cd "$app/node_modules" && { find . -printf '%P %y %s\n' | LC_ALL=C sort
                                 find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha1sum; } | sha1sum | cut -c1-40)
}
before=$(tree_sum)

fail=0
declare -A rate text_of
run() {  # run NAME GPU_LAYERS [env...]
    local name=$1 layers=$2
    shift 2
    local t0=$(date +%s)
    env "$@" node "$here/nlc_chat.mjs" "$app" "$model" "$layers" "$max_tokens" "$threads" >"$work/$name.out" 2>"$work/$name.err"
    local rc=$?
    local tokens=$(sed -nE 's/^tokens: ([0-9]+) .*/\1/p' "$work/$name.out")
    rate[$name]=$(sed -nE 's/^tokens: .*\(([0-9.]+) t\/s\)/\1/p' "$work/$name.out")
    text_of[$name]=$(grep '^text: ' "$work/$name.out")
    echo "$name: exit $rc, $(grep '^gpu layers' "$work/$name.out"), ${tokens:-no} tokens, ${rate[$name]:-?} t/s," \
         "$(( $(date +%s) - t0 )) s"
    [[ $rc == 0 ]] || { echo "  failed:"; tail -5 "$work/$name.err"; fail=1; }
    [[ ${tokens:-0} -gt 0 ]] || { echo "  no tokens came out"; fail=1; }
}
# check NAME WHAT REGEX: the run's stderr matches REGEX (extended).
check() {
    if grep -qE "$3" "$work/$1.err"; then
        echo "  $2: $(grep -E "$3" "$work/$1.err" | tail -1 | sed -E 's/^\[log [a-z]+\] //')"
    else
        echo "  $2: missing (no line matching '$3')"; fail=1
    fi
}
audit_clean() {  # audit_clean NAME MODE LOCAL(zero|some)
    local line
    line=$(grep -E '^standin audit: ' "$work/$1.err" | tail -1)
    echo "  audit: ${line:-none}"
    grep -qE "^standin audit: mode=$2; .*leaks=0; real pointers to caller=0 \(clean\)" <<<"$line" ||
        { echo "  audit missing, not clean or not mode=$2"; fail=1; }
    grep -q 'ggml-base copies=1$' <<<"$line" || { echo "  not exactly one ggml-base in the process"; fail=1; }
    local n
    n=$(sed -nE 's/.*local nodes=([0-9]+).*/\1/p' <<<"$line")
    if [[ $3 == zero && ${n:-x} != 0 ]]; then echo "  local nodes with nothing local"; fail=1; fi
    if [[ $3 == some && ${n:-0} == 0 ]]; then echo "  no node ran on standin's kernels"; fail=1; fi
}

run plain 0
if grep -qE 'standin [a-z]+ mode:|^standin audit' "$work/plain.err"; then echo "  standin is in the plain run"; fail=1; fi

run path max GGML_BACKEND_PATH="$plugin" GGML_STANDIN_AUDIT=1
check path "mode line" 'standin standalone mode: [0-9]+ device\(s\) STANDIN_HOST0'
grep -qE '^gpu layers: [1-9]' "$work/path.out" || { echo "  no layer went to STANDIN_HOST0"; fail=1; }
audit_clean path standalone some

# Nothing on STANDIN_HOST0: ggml-cpu computes everything (one graph split, no
# node on standin's kernels), from the weights it repacks itself (the same
# extra buffer types and sizes as the plain run's), and nothing sits in
# STANDIN_HOST0's own memory. Host-memory buffer names may differ: the token
# embeddings and ggml-cpu's compute buffer live in STANDIN_HOST0_Host, plain
# host memory (Note [host device placement] in glue/device.cpp).
run path-cpu 0 GGML_BACKEND_PATH="$plugin" GGML_STANDIN_AUDIT=1
check path-cpu "mode line" 'standin standalone mode: [0-9]+ device\(s\) STANDIN_HOST0'
audit_clean path-cpu standalone zero
placement() {  # graph splits, and the buffers of ggml-cpu's extra (repacking) types with their sizes
    grep -oE 'graph splits = [0-9]+|[A-Za-z_0-9]+ +model buffer size = +[0-9.]+ MiB' "$work/$1.err" |
        grep -vE '^(CPU|CPU_Mapped|STANDIN_HOST0_Host) ' | sed -E 's/ +/ /g' | LC_ALL=C sort
}
if [[ "$(placement path-cpu)" != "$(placement plain)" ]]; then
    echo "  placement differs from the plain run's:"; diff <(placement plain) <(placement path-cpu) | sed 's/^/    /'; fail=1
else
    echo "  placement as plain: $(placement path-cpu | tr '\n' ';')"
fi
if grep -qE 'STANDIN_HOST0 +(model|KV|compute) buffer size' "$work/path-cpu.err"; then
    echo "  STANDIN_HOST0 holds buffers with nothing offloaded"; fail=1
fi
[[ "${text_of[path-cpu]}" == "${text_of[plain]}" ]] || { echo "  text differs from the plain run's"; fail=1; }

cp "$plugin" "$dropped"
for lo in none all; do
    run "replace-$lo" 0 GGML_STANDIN_LOCAL_OPS=$lo GGML_STANDIN_AUDIT=1
    # ggml's loader picked the plugin, which loaded the best real variant and
    # shows its device under the real name.
    check "replace-$lo" "mode line" \
          "standin replace mode: interposing $bins/libggml-cpu-[a-z0-9]+\.so .*: 1 device\(s\) CPU; local ops: $lo\$"
    audit_clean "replace-$lo" interposed "$([[ $lo == none ]] && echo zero || echo some)"
    if [[ "${text_of[replace-$lo]}" != "${text_of[plain]}" ]]; then
        echo "  text differs from the plain run's:"; echo "    plain:   ${text_of[plain]}"
        echo "    replace: ${text_of[replace-$lo]}"; fail=1
    fi
done
rm -f "$dropped"

after=$(tree_sum)
[[ $before == "$after" ]] && echo "node_modules unchanged" ||
    { echo "node_modules changed during the runs"; fail=1; }

echo "text (plain): ${text_of[plain]:0:160}"
printf '%-14s %10s %8s\n' mode 't/s' 'x plain'
for m in plain path path-cpu replace-none replace-all; do
    printf '%-14s %10s %8s\n' "$m" "${rate[$m]:-?}" \
        "$(awk -v a="${rate[$m]:-0}" -v b="${rate[plain]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')"
done
echo "took $(( $(date +%s) - start )) s"
[[ $fail == 0 ]] && echo "node-llama-cpp: ok" || echo "node-llama-cpp: FAILED (logs in $work)"
exit $fail
