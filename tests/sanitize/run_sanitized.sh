#!/usr/bin/env bash
# Runs one command of the sanitized build and fails when AddressSanitizer,
# LeakSanitizer or UBSan reported anything, whatever the command's exit code.
# An uninstrumented host program (test-backend-ops) that loads the sanitized
# plugin needs the ASan runtime first in the process: it is preloaded for the
# command alone (not for this script's own grep/sed, whose leaks are not ours).
# For test-backend-ops output it also requires 0 FAIL and at least one OK case,
# so a run that tested nothing cannot pass.
# Usage: run_sanitized.sh ASAN_RUNTIME LOG COMMAND [ARGS...]
set -uo pipefail
asan_rt=$1 log=$2
shift 2
here="$(cd "$(dirname "$0")" && pwd)"

# halt_on_error: the first report ends the run (UBSan is also built with
# -fno-sanitize-recover). detect_leaks: leaks of the plugin count; the
# suppressions file lists the host program's own, each with its reason.
# allocator_may_return_null: an impossible allocation must reach our code as
# nullptr, which it turns into an allocation failure for ggml (ASan's default
# is to abort).
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:exitcode=86:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:exitcode=86${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

start=$(date +%s)
LD_PRELOAD="$asan_rt${LD_PRELOAD:+:$LD_PRELOAD}" "$@" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' >"$log"
rc=${PIPESTATUS[0]}
secs=$(( $(date +%s) - start ))

reports=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer' "$log" || true)
passed=$(grep -cE '^  [A-Z_0-9]+\(.*\): OK$' "$log" || true)
failed=$(grep -cE ': FAIL$' "$log" || true)
tbo=$(grep -cE '[0-9]+/[0-9]+ tests passed' "$log" || true)
counts=""
[[ $tbo != 0 ]] && counts=", test-backend-ops cases OK $passed, FAIL $failed"
echo "$(basename "$1"): exit $rc in ${secs} s, sanitizer reports: $reports$counts; log: $log"
bad=0
if [[ $reports != 0 ]]; then
    echo "SANITIZER REPORT:"
    grep -E -A40 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log" | head -80
    bad=1
fi
if [[ $tbo != 0 ]]; then
    grep -E ': FAIL$' "$log" | head -20
    [[ $failed == 0 && $passed -gt 0 ]] || bad=1
fi
if [[ $rc != 0 ]]; then
    echo "exit code $rc"
    tail -30 "$log"
    bad=1
fi
[[ $bad == 0 ]] && echo "clean" || exit 1
