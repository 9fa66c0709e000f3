#!/usr/bin/env bash
# Serves one standin device with ggml's rpc-server (pinned build, the plugin
# loaded through GGML_BACKEND_PATH) on loopback, then runs a client command
# with `--rpc 127.0.0.1:PORT` appended, and checks that the server offered the
# device and served the client. The server is always stopped at the end.
# Usage: rpc_logits.sh RPC_SERVER PLUGIN DEVICE CLIENT [CLIENT ARGS...]
# Exits with the client's code (or 1 when the server did not come up or did
# not serve the device).
set -uo pipefail
server=$1 plugin=$2 device=$3
shift 3
if [[ ! -x "$server" ]]; then
    echo "no rpc-server at $server: run scripts/setup-deps (it builds ggml-rpc-server)"
    exit 1
fi

log=$(mktemp "${TMPDIR:-/tmp}/standin-rpc.XXXXXX")
pid=""
stop() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -f "$log"
}
trap stop EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The port can be taken between choosing and binding: then the server exits,
# and another port is tried.
port=""
for attempt in 1 2 3; do
    port=$(free_port)
    GGML_BACKEND_PATH=$plugin stdbuf -oL "$server" -H 127.0.0.1 -p "$port" -d "$device" -t 2 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do  # up to 10 s to load the backends and listen
        kill -0 "$pid" 2>/dev/null || break
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            break 2
        fi
        sleep 0.1
    done
    echo "rpc-server did not listen on port $port (attempt $attempt):"
    cat "$log"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
done
if [[ -z "$pid" ]]; then
    exit 1
fi
echo "rpc-server pid $pid on 127.0.0.1:$port"

"$@" --rpc "127.0.0.1:$port"
rc=$?

echo "--- rpc-server log"
cat "$log"
if ! grep -q "^  $device: standin" "$log"; then
    echo "rpc-server did not offer $device"
    exit 1
fi
if [[ $(grep -c "Accepted client connection" "$log") -lt 2 ]]; then  # the probe, then the client
    echo "rpc-server served no client"
    exit 1
fi
exit $rc
