#!/usr/bin/env bash
# `standin bench --container` leaves no container behind, whichever way it ends.
# A fake engine on PATH (fake_engine.sh as `podman`) records run/rm; the
# harness is run to the end (normal), made to fail (error), signalled mid-run
# (sigint, sigterm), or has its running "container" killed (child_killed).
# Passes when the exit code is the expected one and every started container
# was removed.
# Usage: container_cleanup.sh normal|error|sigint|sigterm|child_killed STANDIN MODEL WORK
set -uo pipefail
mode=$1 standin=$2 model=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/path"
cp "$here/fake_engine.sh" "$work/path/podman" && chmod +x "$work/path/podman"
export PATH="$work/path:$PATH" FAKE_ENGINE_LOG="$work/engine.log"
: >"$FAKE_ENGINE_LOG"

if [[ $mode == error ]]; then
    echo "not a gguf file" >"$work/broken.gguf"
    model=$work/broken.gguf
fi
[[ $mode == sigint || $mode == sigterm || $mode == child_killed ]] && export FAKE_ENGINE_DELAY=60

"$standin" bench --container debian:bookworm --engine podman -m "$model" -p 16 -n 4 --fa 0 -r 1 -t 1 \
    --configs real,standalone --out "$work/out" >"$work/bench.out" 2>&1 &
bench=$!

first_run_pid() { awk '$1 == "run" { print $3; exit }' "$FAKE_ENGINE_LOG"; }
if [[ $mode == sigint || $mode == sigterm || $mode == child_killed ]]; then
    for _ in $(seq 100); do [[ -n $(first_run_pid) ]] && break; sleep 0.1; done
    child=$(first_run_pid)
    [[ -n $child ]] || { echo "no container was started"; kill -9 $bench; exit 1; }
    case $mode in
        sigint) kill -INT $bench ;;
        sigterm) kill -TERM $bench ;;
        child_killed) kill -KILL "$child" ;;
    esac
fi
wait $bench
rc=$?
case $mode in
    normal) want=0 ;;
    error|child_killed) want=1 ;;
    sigint) want=130 ;;
    sigterm) want=143 ;;
esac
echo "mode $mode: harness exit $rc (expected $want)"
sed 's/^/  bench: /' "$work/bench.out" | tail -6
sed 's/^/  engine: /' "$FAKE_ENGINE_LOG"
fail=0
[[ $rc == "$want" ]] || fail=1
started=$(awk '$1 == "run" { print $2 }' "$FAKE_ENGINE_LOG" | sort -u)
[[ -n $started ]] || { echo "no container was started"; fail=1; }
for name in $started; do
    grep -qx "rm $name" "$FAKE_ENGINE_LOG" || { echo "container $name was not removed"; fail=1; }
done
if [[ $mode != normal && $mode != error ]]; then
    sleep 0.5
    pid=$(first_run_pid)
    if kill -0 "$pid" 2>/dev/null; then echo "the container's process $pid is still running"; kill -9 "$pid"; fail=1; fi
fi
[[ $mode == normal ]] && { [[ $(grep -c '^run ' "$FAKE_ENGINE_LOG") == 4 ]] || { echo "expected 4 runs"; fail=1; }; }
[[ $fail == 0 ]] && echo "container cleanup ($mode): ok, $(wc -w <<<"$started") started, all removed"
exit $fail
