#!/usr/bin/env bash
# Preload mode (Note [preload mode] in interpose/preload.h): libggml-standin.so
# LD_PRELOADed over an application linked to the real CPU backend.
#
# The linked application: the unmodified tools of the pinned build run with the
# ggml libraries built with GGML_BACKEND_DL=OFF first on LD_LIBRARY_PATH (same
# tree, same public ABI), so libggml.so calls ggml_backend_cpu_reg() of
# libggml-cpu.so directly. The tools are copied into an empty folder first:
# ggml's loader scans the executable's folder and the cwd for backend modules,
# and there must be none.
#
#   ops   : test-backend-ops lists CPU alone, STANDIN_CPU preloaded (once, also
#           when GGML_BACKEND_PATH names the same module); the same verdict list
#           with LOCAL_OPS none and all; a clean audit saying mode=preload.
#           In a linked application the registry holds one CPU device, so the
#           reference test-backend-ops compares against is that same device:
#           these verdicts show support and execution, not numerics (the path
#           and replace suites and the text comparison below cover those).
#           Also a DL application (the pinned build as is) with standin
#           preloaded: its dlopened ggml-cpu module calls its own
#           ggml_backend_cpu_reg, which must stay its own (device CPU, passes).
#   model : llama-completion on a tiny model, linked alone vs preloaded with
#           LOCAL_OPS none and all: the same text, a clean audit.
# Usage: run_preload_suite.sh ops|model LLAMA_BIN LINKED_BIN PLUGIN WORKDIR [MODEL]
set -uo pipefail
what=$1 bin=$2 linked=$3 plugin=$4 work=$5 model=${6:-}
ops=${PRELOAD_OPS:-ADD,MUL_MAT,SOFT_MAX}
# f32 cases only: enough to run each op family through both paths in seconds.
cases=${PRELOAD_CASES:-type=f32|type_a=f32,type_b=f32}

rm -rf "$work" && mkdir -p "$work/app"
app=$work/app
cp "$bin/test-backend-ops" "$bin/llama-completion" "$app/"
cd "$app" || exit 1
strip_colors() { sed -e 's/\x1b\[[0-9;]*m//g'; }
verdicts() { grep -E '^  [A-Z_0-9]+\(.*\): (OK|FAIL|not supported)' "$1" | sed -E 's/(not supported).*/\1/' | sort; }
devices() { "$@" support -o NONE 2>/dev/null | grep -E '^Backend [0-9]+/[0-9]+: ' | sed -E 's/^Backend [0-9]+\/[0-9]+: //' | tr '\n' ' ' | sed 's/ $//'; }
audit_ok() { grep -qE '^standin audit: mode=preload; .*leaks=0; real pointers to caller=0 \(clean\)' "$1"; }
fail=0
expect() {  # expect WHAT GOT WANT
    if [[ "$2" == "$3" ]]; then echo "$1: $2"; else echo "$1: got '$2', want '$3'"; fail=1; fi
}
linked_env=(env LD_LIBRARY_PATH="$linked")
pre_env=(env LD_LIBRARY_PATH="$linked" LD_PRELOAD="$plugin" GGML_STANDIN_AUDIT=1)

if [[ $what == ops ]]; then
    expect "devices, linked alone" "$(devices "${linked_env[@]}" ./test-backend-ops)" "CPU"
    expect "devices, preloaded" "$(devices "${pre_env[@]}" ./test-backend-ops)" "STANDIN_CPU"
    expect "devices, preloaded and GGML_BACKEND_PATH" \
           "$(devices "${pre_env[@]}" GGML_BACKEND_PATH="$plugin" ./test-backend-ops)" "STANDIN_CPU"
    # GGML_STANDIN_MODE=standalone never stands in for a real library.
    expect "devices, preloaded, GGML_STANDIN_MODE=standalone" \
           "$(devices "${pre_env[@]}" GGML_STANDIN_MODE=standalone ./test-backend-ops)" "CPU"
    # (the pinned build as it is: its folder holds the CPU module ggml loads)
    expect "devices, DL application with standin preloaded" "$(devices env LD_PRELOAD="$plugin" "$bin/test-backend-ops")" "CPU"
    # ... where standin says, once, that preload mode does not apply, and an
    # audit asked for still reports.
    env LD_PRELOAD="$plugin" GGML_STANDIN_AUDIT=1 "$bin/test-backend-ops" support -o NONE >"$work/dl-pre.log" 2>&1
    expect "DL application preloaded: warnings" "$(grep -c 'preload mode does not apply here' "$work/dl-pre.log")" 1
    expect "DL application preloaded: audit" "$(grep -oE '^standin audit: mode=[a-z]+' "$work/dl-pre.log")" \
           "standin audit: mode=none"

    # Preloaded, with standin also in path mode over a second copy of the CPU
    # module: that copy's ggml_backend_init tail-calls its registration function
    # from standin's loader, and must get its own (not the copy ggml loaded).
    mkdir -p "$work/real" && cp "$bin/libggml-cpu.so" "$work/real/"
    expect "devices, DL application, preloaded and in path mode" \
           "$(devices env LD_PRELOAD="$plugin" GGML_BACKEND_PATH="$plugin" GGML_STANDIN_REAL="$work/real/libggml-cpu.so" "$bin/test-backend-ops")" \
           "CPU STANDIN_CPU"

    "${linked_env[@]}" ./test-backend-ops test -b CPU -o "$ops" -p "$cases" 2>"$work/real.err" | strip_colors >"$work/real.log"
    rc=${PIPESTATUS[0]}
    verdicts "$work/real.log" >"$work/real.verdicts"
    echo "linked alone: exit $rc, $(grep -c ': OK' "$work/real.verdicts") OK, $(grep -c 'not supported' "$work/real.verdicts") not supported"
    [[ $rc == 0 && -s $work/real.verdicts ]] || fail=1
    for lo in none all; do
        "${pre_env[@]}" GGML_STANDIN_LOCAL_OPS=$lo ./test-backend-ops test -b STANDIN_CPU -o "$ops" -p "$cases" \
            2>"$work/pre-$lo.err" | strip_colors >"$work/pre-$lo.log"
        rc=${PIPESTATUS[0]}
        verdicts "$work/pre-$lo.log" >"$work/pre-$lo.verdicts"
        audit=$(grep -E '^standin audit' "$work/pre-$lo.err" | tail -1)
        echo "preloaded, LOCAL_OPS=$lo: exit $rc, $(grep -c ': OK' "$work/pre-$lo.verdicts") OK; $audit"
        [[ $rc == 0 ]] || fail=1
        if ! diff -q "$work/real.verdicts" "$work/pre-$lo.verdicts" >/dev/null; then
            echo "  verdicts differ from the linked library alone:"; diff "$work/real.verdicts" "$work/pre-$lo.verdicts" | head; fail=1
        fi
        audit_ok "$work/pre-$lo.err" || { echo "  audit missing, not clean or not mode=preload"; fail=1; }
        local_nodes=$(sed -nE 's/.*local nodes=([0-9]+).*/\1/p' <<<"$audit")
        if [[ $lo == none && $local_nodes != 0 ]]; then echo "  local nodes with LOCAL_OPS=none"; fail=1; fi
        if [[ $lo == all && ${local_nodes:-0} == 0 ]]; then echo "  no node ran locally"; fail=1; fi
    done
    # The DL application: standin preloaded must leave its CPU module working.
    env LD_PRELOAD="$plugin" "$bin/test-backend-ops" test -b CPU -o ADD -p 'type=f32' >"$work/dl.log" 2>&1
    rc=$?
    echo "DL application preloaded, CPU ADD f32: exit $rc, $(grep -c 'OK' "$work/dl.log") OK lines"
    [[ $rc == 0 ]] || fail=1
elif [[ $what == model ]]; then
    [[ -f $model ]] || { echo "no model at '$model'"; exit 1; }
    gen=(-m "$model" -p "The capital of France is" -n 16 --ignore-eos -s 7 --temp 0 -c 256 -no-cnv --no-warmup)
    "${linked_env[@]}" ./llama-completion "${gen[@]}" >"$work/real.txt" 2>"$work/real.log"
    rc=$?
    echo "linked alone: exit $rc"
    [[ $rc == 0 ]] || fail=1
    for lo in none all; do
        "${pre_env[@]}" GGML_STANDIN_LOCAL_OPS=$lo ./llama-completion "${gen[@]}" >"$work/pre-$lo.txt" 2>"$work/pre-$lo.log"
        rc=$?
        echo "preloaded, LOCAL_OPS=$lo: exit $rc; $(grep -E '^standin audit' "$work/pre-$lo.log" | tail -1)"
        [[ $rc == 0 ]] || fail=1
        # llama.cpp's system_info line lists the CPU registry's features: standin's.
        grep -q 'system_info: .*STANDIN = 1' "$work/pre-$lo.log" || { echo "  llama.cpp's CPU registry is not standin's"; fail=1; }
        audit_ok "$work/pre-$lo.log" || { echo "  audit missing, not clean or not mode=preload"; fail=1; }
        if ! cmp -s "$work/real.txt" "$work/pre-$lo.txt"; then
            echo "  generated text differs:"; diff "$work/real.txt" "$work/pre-$lo.txt" | head; fail=1
        fi
    done
    echo "text: $(head -c 100 "$work/real.txt" | tr '\n' ' ')"
fi
[[ $fail == 0 ]] && echo "preload $what: ok" || echo "preload $what: FAILED (logs in $work)"
exit $fail
