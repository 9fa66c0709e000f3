#!/usr/bin/env bash
# Runs a command only where standin sees DEVICE; elsewhere prints a visible
# "skipped" line and exits 77 (the tests' SKIP_RETURN_CODE).
# Usage: if_device.sh STANDIN PLUGIN DEVICE COMMAND...
set -uo pipefail
standin=$1 plugin=$2 device=$3
shift 3
if ! "$standin" devices --plugin "$plugin" 2>/dev/null | grep -q "^$device "; then
    echo "skipped: no $device device on this machine"
    exit 77
fi
exec "$@"
