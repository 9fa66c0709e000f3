#!/usr/bin/env bash
# Interposition over npm's prebuilt ggml-vulkan (@node-llama-cpp/linux-x64-vulkan),
# on Mesa's lavapipe: a real library whose device memory standin's kernels
# cannot address, so local dispatch goes through staging (Note [staging] in
# interpose/staging.h).
#
# An app folder holds the unmodified pinned tools, npm's ggml-vulkan and CPU
# variants (the reference of test-backend-ops and of the logits), and one
# ggml-base (npm's, with the libggml-base.so.0 name the tools ask for);
# LD_LIBRARY_PATH points there. GGML_VK_VISIBLE_DEVICES=0 makes ggml-vulkan
# take lavapipe, a CPU-type device it skips otherwise.
#
#   ops    : test-backend-ops on Vulkan0 alone, then on STANDIN_Vulkan0 with
#            LOCAL_OPS none, all and a mixed set, over the cases of cases.txt:
#            the same OK / "not supported" lists; a clean audit; one
#            ggml-base; no local node with none; with all, local (staged)
#            nodes of every op whose cases standin's host kernels claim.
#   logits : a llama model through STANDIN_Vulkan0 with LOCAL_OPS=all against
#            ggml-cpu (NMSE <= 1e-4), staged nodes > 0, a clean audit
#            (VK_LOGITS_LOCAL_OPS="all none" adds ggml-vulkan's own run).
#   bench  : llama-bench, one run each: Vulkan0 alone, STANDIN_Vulkan0 with
#            LOCAL_OPS none and all, and standin's host device standalone
#            (the same kernels without staging): the cost of staging. Run by
#            hand: ... bench ... WORKDIR MODEL.
# Exit 77 (skipped) when no Vulkan device appears.
# Usage: run_vulkan_suite.sh ops|logits|bench LLAMA_BIN PREBUILT_CPU_DIR PREBUILT_VULKAN_DIR PLUGIN WORKDIR [STANDIN MODEL]
set -uo pipefail
mode=$1 bin=$2 cpu=$3 vk=$4 plugin=$5 work=$6 standin=${7:-} model=${8:-}
# The cases: a list of small cases of the llama op set (cases.txt beside this
# script, or VK_CASES): on lavapipe a case compiles its own pipelines.
cases_file=${VK_CASES:-$(dirname "$0")/cases.txt}
mixed=${VK_MIXED:-ADD,MUL_MAT,SOFT_MAX}

rm -rf "$work" && mkdir -p "$work/app"
app=$work/app
cp "$bin/test-backend-ops" "$bin/llama-bench" "$app/"
cp "$cpu"/libggml-cpu-*.so "$vk/libggml-vulkan.so" "$vk/libggml-base.so" "$app/"
ln -s libggml-base.so "$app/libggml-base.so.0"
export LD_LIBRARY_PATH=$app GGML_VK_VISIBLE_DEVICES=0
real=$app/libggml-vulkan.so
strip_colors() { sed -e 's/\x1b\[[0-9;]*m//g'; }
fail=0

devices=$("$app/test-backend-ops" support -o NONE 2>/dev/null | grep -oE '^Backend [0-9]+/[0-9]+: [A-Za-z0-9_]+' | awk '{print $3}')
if ! grep -qx Vulkan0 <<<"$devices"; then
    echo "skipped: no Vulkan device (mesa-vulkan-drivers and libvulkan1 give lavapipe; found: $(echo $devices))"
    exit 77
fi

# The interposed runs: standin over the real library, audit at exit.
interposed() { env GGML_BACKEND_PATH="$plugin" GGML_STANDIN_REAL="$real" GGML_STANDIN_AUDIT=1 "$@"; }
audit_line() { grep -E '^standin audit' "$1" | tail -1; }
check_audit() {  # check_audit AUDIT_LINE
    grep -q 'leaks=0; real pointers to caller=0 (clean)' <<<"$1" || { echo "  audit not clean"; fail=1; }
    grep -q 'ggml-base copies=1$' <<<"$1" || { echo "  not exactly one ggml-base in the process"; fail=1; }
}
field() { sed -nE "s/.*$1=([0-9]+).*/\1/p" <<<"$2"; }

if [[ $mode == ops ]]; then
    grep -vE '^(#|$)' "$cases_file" >"$work/cases"
    filter=$(paste -sd, "$work/cases")
    # The ops (as ggml_op_desc names them) of which standin's host kernels
    # claim at least one listed case: its standalone host device answers.
    GGML_BACKEND_PATH="$plugin" "$app/test-backend-ops" support -b STANDIN_HOST0 -o "$filter" 2>/dev/null | strip_colors \
        | sed -nE 's/^  ([A-Z_0-9]+)\(.*\): SUPPORTED$/\1/p' | sort -u >"$work/claimed.ops"
    echo "$(grep -c . "$work/cases") cases; standin's host kernels claim some of: $(echo $(cat "$work/claimed.ops"))"

    tbo() {  # tbo LOG DEVICE [env...]: prints the exit code
        local log=$1 dev=$2
        shift 2
        env "$@" "$app/test-backend-ops" test -b "$dev" -o "$filter" 2>"$log.err" | strip_colors >"$log"
        echo "${PIPESTATUS[0]}"
    }
    verdicts() { grep -E '^  [A-Z_0-9]+\(.*\): (OK|FAIL|not supported)' "$1" | sed -E 's/(not supported).*/\1/' | sort -u; }
    t0=$(date +%s)
    rc=$(tbo "$work/real.log" Vulkan0)
    verdicts "$work/real.log" >"$work/real.verdicts"
    echo "Vulkan0 alone: exit $rc, $(grep -c ': OK' "$work/real.verdicts") OK, $(grep -c ': FAIL' "$work/real.verdicts") FAIL, $(grep -c 'not supported' "$work/real.verdicts") not supported ($(( $(date +%s) - t0 )) s)"
    [[ $rc == 0 && -s $work/real.verdicts ]] || fail=1
    # Every listed case ran (a line the pinned tool does not know names nothing).
    sed -E 's/^  //; s/: (OK|FAIL|not supported)$//' "$work/real.verdicts" | sort -u >"$work/ran"
    sort -u "$work/cases" | comm -23 - "$work/ran" >"$work/missing"
    if [[ -s $work/missing ]]; then echo "  listed cases that did not run:"; head -5 "$work/missing"; fail=1; fi
    for lo in none all "$mixed"; do
        tag=${lo//,/_}
        t0=$(date +%s)
        rc=$(tbo "$work/standin-$tag.log" STANDIN_Vulkan0 GGML_BACKEND_PATH="$plugin" GGML_STANDIN_REAL="$real" \
             GGML_STANDIN_AUDIT=1 GGML_STANDIN_LOCAL_OPS="$lo")
        verdicts "$work/standin-$tag.log" >"$work/standin-$tag.verdicts"
        a=$(audit_line "$work/standin-$tag.log.err")
        echo "interposed, LOCAL_OPS=$lo: exit $rc, $(grep -c ': OK' "$work/standin-$tag.verdicts") OK ($(( $(date +%s) - t0 )) s)"
        echo "  $a"
        if ! diff -q "$work/real.verdicts" "$work/standin-$tag.verdicts" >/dev/null; then
            echo "  pass list differs from the real library's:"; diff "$work/real.verdicts" "$work/standin-$tag.verdicts" | head -10
            fail=1
        fi
        [[ $rc == 0 ]] || fail=1
        check_audit "$a"
        local_nodes=$(field 'local nodes' "$a")
        if [[ $lo == none && $local_nodes != 0 ]]; then echo "  local nodes with LOCAL_OPS=none"; fail=1; fi
        if [[ $lo != none && ${local_nodes:-0} == 0 ]]; then echo "  no node ran locally"; fail=1; fi
        if [[ $lo == all ]]; then
            # Every op standin claims ran locally, on staged copies of Vulkan memory.
            by_op=$(sed -nE 's/.*; local by op: ([^;]*);.*/\1/p' <<<"$a" | tr ' ' '\n')
            while read -r op; do
                grep -qE "^$op=[1-9]" <<<"$by_op" || { echo "  standin claims $op, but no $op node ran locally"; fail=1; }
            done <"$work/claimed.ops"
            [[ $(sed -nE 's/.*\(staged ([0-9]+)\).*/\1/p' <<<"$a") -gt 0 ]] || { echo "  no node was staged"; fail=1; }
        fi
    done
elif [[ $mode == logits ]]; then
    [[ -f $model && -x $standin ]] || { echo "usage: ... logits ... STANDIN MODEL"; exit 2; }
    export GGML_BACKEND_DIR=$app  # standin logits loads its reference ggml-cpu from there
    "$standin" logits --plugin "$plugin" --model "$model" --device none --out "$work/cpu.logits" >"$work/cpu.log" 2>&1 \
        || { echo "reference run failed:"; tail -5 "$work/cpu.log"; exit 1; }
    for lo in ${VK_LOGITS_LOCAL_OPS:-all}; do
        t0=$(date +%s)
        interposed GGML_STANDIN_LOCAL_OPS=$lo "$standin" logits --plugin "$plugin" --model "$model" \
            --device STANDIN_Vulkan0 --compare "$work/cpu.logits" --max-nmse 1e-4 >"$work/standin-$lo.log" 2>&1
        rc=$?
        a=$(audit_line "$work/standin-$lo.log")
        echo "STANDIN_Vulkan0, LOCAL_OPS=$lo: exit $rc ($(( $(date +%s) - t0 )) s); $(grep -oE 'NMSE[^,;]*' "$work/standin-$lo.log" | tail -1)"
        echo "  $a"
        [[ $rc == 0 ]] || { tail -5 "$work/standin-$lo.log"; fail=1; }
        check_audit "$a"
        if [[ $lo == all ]]; then
            [[ $(field 'local nodes' "$a") -gt 0 ]] || { echo "  no node ran locally"; fail=1; }
            [[ $(sed -nE 's/.*\(staged ([0-9]+)\).*/\1/p' <<<"$a") -gt 0 ]] || { echo "  no node was staged"; fail=1; }
        fi
    done
elif [[ $mode == bench ]]; then
    [[ -f $model ]] || model=$standin  # bench takes the model as its 7th argument
    args=(-m "$model" -p "${VK_BENCH_P:-64}" -n "${VK_BENCH_N:-16}" -r 1 -ngl 99 -o md)
    echo "Vulkan0 alone:"
    "$app/llama-bench" "${args[@]}" -dev Vulkan0 2>"$work/real.err" | grep -E '^\|' || fail=1
    for lo in none all; do
        echo "STANDIN_Vulkan0, LOCAL_OPS=$lo:"
        interposed GGML_STANDIN_LOCAL_OPS=$lo "$app/llama-bench" "${args[@]}" -dev STANDIN_Vulkan0 2>"$work/standin-$lo.err" \
            | grep -E '^\|' || fail=1
        echo "  $(audit_line "$work/standin-$lo.err")"
    done
    # The same kernels without staging: standin's own host device.
    echo "STANDIN_HOST0 (standalone, no real library):"
    GGML_BACKEND_PATH="$plugin" "$app/llama-bench" "${args[@]}" -dev STANDIN_HOST0 2>"$work/host.err" | grep -E '^\|' || fail=1
else
    echo "unknown mode '$mode'"; exit 2
fi
[[ $fail == 0 ]] && echo "vulkan $mode: ok" || echo "vulkan $mode: FAILED (logs in $work)"
exit $fail
