#!/bin/sh
# A stand-in container engine for the cleanup tests (installed on PATH as
# `podman`): records each `run NAME PID` and `rm NAME` in $FAKE_ENGINE_LOG and
# runs the container's command here. FAKE_ENGINE_DELAY=S sleeps first, so a
# test can signal the harness while a "container" is running.
log=${FAKE_ENGINE_LOG:?FAKE_ENGINE_LOG is not set}
cmd=$1
shift
case $cmd in
run)
    name=
    while [ $# -gt 0 ]; do
        case $1 in
            --rm) shift ;;
            --name) name=$2; shift 2 ;;
            --network|-v|--gpus|--device) shift 2 ;;
            -e) export "$2"; shift 2 ;;
            *) break ;;
        esac
    done
    shift  # the image
    echo "run $name $$" >>"$log"
    if [ -n "${FAKE_ENGINE_DELAY:-}" ]; then sleep "$FAKE_ENGINE_DELAY"; fi
    exec "$@"
    ;;
rm)
    [ "$1" = -f ] && shift
    echo "rm $1" >>"$log"
    ;;
*)
    echo "fake engine: unknown command '$cmd'" >&2
    exit 2
    ;;
esac
