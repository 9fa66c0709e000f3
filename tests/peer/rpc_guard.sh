#!/usr/bin/env bash
# One client's bad graph must not take an RPC server of a standin device down.
# Starts a server for STANDIN_HOST0 on a free loopback port, then runs, one
# after another: a graph with a node standin lacks (it must be computed right,
# here by the CPU fallback), a graph no backend can run (that client must lose
# its connection, never get a result), and the first graph again (the server
# must still serve). The server is always stopped at the end.
# Usage: rpc_guard.sh standin|ggml SERVER PLUGIN CLIENT GGML_BIN_DIR
#   standin: SERVER is the standin tool (`standin rpc-server`, the fix);
#   ggml:    SERVER is ggml's rpc-server (dies on the first graph: how it was).
set -uo pipefail
kind=$1 server=$2 plugin=$3 client=$4 bin=$5
log=$(mktemp "${TMPDIR:-/tmp}/standin-rpc-guard.XXXXXX")
pid=""
stop() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -f "$log"
}
trap stop EXIT
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# exec: the background job is the server itself, so that stop() ends it.
start() {
    if [[ $kind == standin ]]; then
        exec stdbuf -oL -eL "$server" rpc-server --plugin "$plugin" -H 127.0.0.1 -p "$1" -d STANDIN_HOST0 -t 2
    else
        GGML_BACKEND_PATH=$plugin exec stdbuf -oL -eL "$server" -H 127.0.0.1 -p "$1" -d STANDIN_HOST0 -t 2
    fi
}
port=""
for attempt in 1 2 3; do  # the port can be taken between choosing and binding
    port=$(free_port)
    start "$port" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break 2; fi
        sleep 0.1
    done
    echo "the server did not listen on port $port (attempt $attempt):"; cat "$log"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
done
[[ -z "$pid" ]] && exit 1
fail() { echo "FAIL: $*"; echo "--- server log"; cat "$log"; exit 1; }
alive() { kill -0 "$pid" 2>/dev/null && ! grep -q "GGML_ASSERT" "$log"; }

timeout -s KILL 60 "$client" fallback "127.0.0.1:$port" "$bin" || fail "the graph with a node standin lacks"
alive || fail "the server died after the first client"
out=$(timeout -s KILL 60 "$client" unrunnable "127.0.0.1:$port" "$bin" 2>&1)
rc=$?
echo "$out" | tail -3
(( rc == 0 )) && fail "a graph nothing can run returned a result"
grep -q "rpc client unrunnable: FAIL" <<<"$out" && fail "a graph nothing can run returned a result"
alive || fail "the server died of the unrunnable graph"
grep -q "refused a client's graph: node 0 (MUL_MAT" "$log" || fail "the server did not say why it refused the graph"
timeout -s KILL 60 "$client" fallback "127.0.0.1:$port" "$bin" || fail "the next client was not served"
alive || fail "the server died after the last client"
echo "--- server log"; cat "$log"
echo "rpc guard: the server survived a bad graph and served the next client: ok"
