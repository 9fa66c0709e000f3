#!/usr/bin/env bash
# Interposition over the prebuilt real CPU library (@node-llama-cpp/linux-x64).
#
# An "application folder" is laid out the way a user has one: unmodified
# llama.cpp tools copied beside the prebuilt real libraries, so ggml's loader
# (which scans the executable's folder) finds exactly those.
#
#   real    : lays out WORKDIR/app and runs test-backend-ops on the real
#             library alone (device CPU): exit 0, and its OK and "not
#             supported" lists (WORKDIR/real.verdicts) are what each path run
#             must give.
#   path    : after real, on the same WORKDIR: test-backend-ops on standin
#             interposing that library through GGML_BACKEND_PATH (device
#             STANDIN_CPU) with the given LOCAL_OPS (none, all or a set): the
#             same OK and "not supported" lists as the real library alone, a
#             clean audit, local nodes > 0 where ops are local. Path runs with
#             different LOCAL_OPS share one real run and can run side by side
#             (each writes only its own standin-<tag>.* files).
#             INTERPOSE_PATH_OPS (a subset of the real run's ops; default
#             all of them) and INTERPOSE_PATH_FILTER (a lookahead put before
#             the real run's filter) narrow a path run to a sample; its
#             verdicts must then be lines of the real run's list.
#   replace : standin installed as libggml-cpu-standin.so beside the real
#             libggml-cpu-*.so variants: ggml loads it instead of the real
#             library (once, under the real name CPU), standin loads the best
#             variant, and llama-completion generates the same text as with
#             the real library alone.
# One ggml-base: the folder holds npm's libggml-base.so, and libggml-base.so.0
# (the soname the pinned tools ask for) links to it; LD_LIBRARY_PATH on the
# folder sends the tools there too, so every library in the process shares
# that one copy (the audit line shows "ggml-base copies=1"). With two copies,
# ggml's loader opening and closing the variants can abort the process
# (ggml.cpp's terminate-handler check), on some CPUs and not others.
# Usage: run_interpose_suite.sh real    LLAMA_BIN PREBUILT_DIR PLUGIN WORKDIR
#        run_interpose_suite.sh path    LLAMA_BIN PREBUILT_DIR PLUGIN WORKDIR LOCAL_OPS
#        run_interpose_suite.sh replace LLAMA_BIN PREBUILT_DIR PLUGIN WORKDIR MODEL
set -uo pipefail
mode=$1 bin=$2 prebuilt=$3 plugin=$4 work=$5 arg=${6:-}
app=$work/app
export LD_LIBRARY_PATH=$app
strip_colors() { sed -e 's/\x1b\[[0-9;]*m//g'; }
fail=0
[[ $mode == real || $mode == path || $mode == replace ]] || { echo "unknown mode '$mode' (real, path or replace)"; exit 2; }

if [[ $mode == real || $mode == replace ]]; then
    rm -rf "$work" && mkdir -p "$app"
    cp "$bin/test-backend-ops" "$bin/llama-completion" "$app/"
    cp "$prebuilt"/libggml-cpu-*.so "$prebuilt/libggml-base.so" "$app/"
    ln -s libggml-base.so "$app/libggml-base.so.0"
fi
if [[ $mode == real ]]; then
    # The op list and the variant ggml loaded are the real run's, kept beside
    # its verdicts so that every path run tests exactly these. GLU and unary
    # cases are named by their sub-op (-o GLU or -o UNARY selects none).
    echo "${INTERPOSE_OPS:-ADD,SUB,MUL,DIV,SCALE,CPY,CONT,DUP,GET_ROWS,SET_ROWS,RMS_NORM,NORM,ROPE,SOFT_MAX,MUL_MAT,SWIGLU,GEGLU,REGLU,SILU,GELU,ARGMAX,SUM_ROWS,CONCAT,REPEAT}" >"$work/real.ops"
    # Every case of those ops but the families that time the test's own work
    # and the library's kernels, not the interposition (test-backend-ops line
    # by line, pinned ggml-cpu): 1536 batched 16x8 products (13 s each), the
    # i-quant and ternary types (their random data is quantized by an
    # importance search: GET_ROWS iq1_s 12 s), ROPE over 8192 rows (4 s each),
    # the binary ops and REPEAT over 16M elements (20 cases, 48 s of the
    # prebuilt library's own run on an AVX-512 EPYC), and four row gathers
    # from 70000 rows or 700 x 100 matrices (25-35 s), the CONT of 2-9M
    # element permutations (18 cases, 14-17 s) and SOFT_MAX over 1023-1024
    # rows of 1023-1024 (40 cases, 5 s): about 55 s of each run's 228, in
    # each of the four runs. Products over batches, the other block types,
    # ROPE, the binary ops, the large copies and SOFT_MAX stay in
    # peer.backend_ops.host on standin's own kernels.
    echo "${INTERPOSE_FILTER:-^(?!.*(bs=\[1536,|type(_a)?=(iq|tq)|ne_a=\[16,16,8192,|ne=\[64,262144,|ne=\[1,1,65536,1\],nr=\[256,|be1=700,|m=80000,|ne=\[(2304|1024|1000),(64|33),(64|65),1\],use_view_slice|ne=\[102[34],102[34],1,1\],mask=)).*}" >"$work/real.filter"
elif [[ $mode == path ]]; then
    [[ -s $work/real.verdicts && -s $work/real.lib && -s $work/real.ops && -s $work/real.filter ]] ||
        { echo "no real-library run in $work (run_interpose_suite.sh real, ctest fixture interpose_cpu_real)"; exit 1; }
fi
ops=$(cat "$work/real.ops" 2>/dev/null) filter=$(cat "$work/real.filter" 2>/dev/null)
sample=0
if [[ $mode == path && -n ${INTERPOSE_PATH_OPS:-}${INTERPOSE_PATH_FILTER:-} ]]; then
    sample=1 ops=${INTERPOSE_PATH_OPS:-$ops} filter="^${INTERPOSE_PATH_FILTER:-}${filter#^}"
fi

run_tbo() {  # run_tbo LOG DEVICE [env...]
    local log=$1 dev=$2
    shift 2
    # Case lines go to stdout; logs (the real library's, standin's) to stderr, kept apart.
    env "$@" "$app/test-backend-ops" test -b "$dev" -o "$ops" -p "$filter" 2>"$log.err" | strip_colors >"$log"
    echo "${PIPESTATUS[0]}"
}
# The case lines of one device's section, normalised, with their verdicts.
verdicts() { grep -E '^  [A-Z_0-9]+\(.*\): (OK|FAIL|not supported)' "$1" | sed -E 's/(not supported).*/\1/' | sort; }

if [[ $mode == real ]]; then
    rc=$(run_tbo "$work/real.log" CPU)
    real_lib=$(grep -oE 'loaded CPU backend from [^ ]+' "$work/real.log.err" | head -1 | awk '{print $5}')
    verdicts "$work/real.log" >"$work/real.verdicts.tmp"
    echo "real library alone ($real_lib): exit $rc, $(grep -c ': OK' "$work/real.verdicts.tmp") OK, $(grep -c 'not supported' "$work/real.verdicts.tmp") not supported"
    # Only a passing run leaves a list to compare against.
    if [[ $rc == 0 && -n $real_lib ]]; then
        mv "$work/real.verdicts.tmp" "$work/real.verdicts" && echo "$real_lib" >"$work/real.lib"
    else
        fail=1
    fi
elif [[ $mode == path ]]; then
    lo=$arg real_lib=$(cat "$work/real.lib")
    [[ -n $lo ]] || { echo "path: no LOCAL_OPS given"; exit 1; }
    tag=${lo//,/_}
    rc=$(run_tbo "$work/standin-$tag.log" STANDIN_CPU GGML_BACKEND_PATH="$plugin" GGML_STANDIN_REAL="$real_lib" \
         GGML_STANDIN_LOCAL_OPS="$lo" GGML_STANDIN_AUDIT=1)
    verdicts "$work/standin-$tag.log" >"$work/standin-$tag.verdicts"
    audit=$(grep -E '^standin audit' "$work/standin-$tag.log.err" | tail -1)
    echo "interposed, LOCAL_OPS=$lo: exit $rc, $(grep -c ': OK' "$work/standin-$tag.verdicts") OK; $audit"
    if [[ $sample == 1 ]]; then
        # A sample: every verdict is the real run's for that case, and there are some.
        extra=$(comm -13 "$work/real.verdicts" "$work/standin-$tag.verdicts")
        if [[ -n $extra || ! -s $work/standin-$tag.verdicts ]]; then
            echo "  sample verdicts not in the real library's list (or none):"; head -10 <<<"$extra"
            fail=1
        fi
    elif ! diff -q "$work/real.verdicts" "$work/standin-$tag.verdicts" >/dev/null; then
        echo "  pass list differs from the real library's:"; diff "$work/real.verdicts" "$work/standin-$tag.verdicts" | head -10
        fail=1
    fi
    [[ $rc == 0 ]] || fail=1
    grep -q 'leaks=0; real pointers to caller=0 (clean)' <<<"$audit" || { echo "  audit not clean"; fail=1; }
    grep -q 'ggml-base copies=1$' <<<"$audit" || { echo "  not exactly one ggml-base in the process"; fail=1; }
    local_nodes=$(sed -nE 's/.*local nodes=([0-9]+).*/\1/p' <<<"$audit")
    if [[ $lo == none && $local_nodes != 0 ]]; then echo "  local nodes with LOCAL_OPS=none"; fail=1; fi
    if [[ $lo != none && ${local_nodes:-0} == 0 ]]; then echo "  no node ran locally"; fail=1; fi
elif [[ $mode == replace ]]; then
    model=$arg
    [[ -f $model ]] || { echo "no model at '$model'"; exit 1; }
    gen=(-m "$model" -p "The capital of France is" -n 24 --ignore-eos -s 7 --temp 0 -c 256 -no-cnv --no-warmup)
    "$app/llama-completion" "${gen[@]}" >"$work/real.txt" 2>"$work/real.log"
    echo "real library alone: exit $?; $(grep -oE 'loaded CPU backend from [^ ]+' "$work/real.log")"
    cp "$plugin" "$app/libggml-cpu-standin.so"
    GGML_STANDIN_AUDIT=1 "$app/llama-completion" "${gen[@]}" >"$work/standin.txt" 2>"$work/standin.log"
    rc=$?
    echo "replace mode: exit $rc"
    grep -E '^standin audit' "$work/standin.log"
    [[ $rc == 0 ]] || fail=1
    # ggml's loader, from the same folder: one CPU device, under the real name
    # (Note [interposed names]), from standin, which says it took effect.
    GGML_BACKEND_PATH= "$app/test-backend-ops" support -o NONE >"$work/devices.log" 2>&1
    devices=$(grep -E '^Backend [0-9]+/[0-9]+: ' "$work/devices.log" | sed -E 's/^Backend [0-9]+\/[0-9]+: //')
    echo "devices ggml loads from that folder: $(echo $devices)"
    [[ "$(echo $devices)" == "CPU" ]] || { echo "  expected exactly CPU"; fail=1; }
    grep -E 'loaded CPU backend from .*/libggml-cpu-standin\.so' "$work/devices.log" ||
        { echo "  ggml did not load the CPU backend from standin"; fail=1; }
    grep -E 'standin replace mode: .*: 1 device\(s\) CPU;' "$work/devices.log" ||
        { echo "  no line saying replace mode took effect"; fail=1; }
    grep -q 'leaks=0; real pointers to caller=0 (clean)' "$work/standin.log" || { echo "  audit not clean"; fail=1; }
    grep -qE '^standin audit.*ggml-base copies=1$' "$work/standin.log" || { echo "  not exactly one ggml-base"; fail=1; }
    if ! cmp -s "$work/real.txt" "$work/standin.txt"; then
        echo "  generated text differs:"; diff "$work/real.txt" "$work/standin.txt" | head; fail=1
    else
        echo "same text: $(head -c 120 "$work/standin.txt" | tr '\n' ' ')"
    fi
fi
what=$mode
[[ $mode == path ]] && what="path $arg"
[[ $fail == 0 ]] && echo "interpose $what: ok" || echo "interpose $what: FAILED (logs in $work)"
exit $fail
