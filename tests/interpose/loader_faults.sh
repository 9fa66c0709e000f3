#!/usr/bin/env bash
# A real library that must be refused before any of its code runs: the plugin
# itself, a copy of it, a truncated real library, a backend with no devices.
# Each case runs `standin devices` with GGML_STANDIN_REAL set to it and must
# print the typed error, fall back to standalone and exit 0 within 5 s (the
# plugin as its own real library used to deadlock, a truncated one to die of SIGBUS).
# Usage: loader_faults.sh CASE STANDIN PLUGIN REAL_LIB WORK_DIR
#   CASE: self | copy | truncated | no_devices (REAL_LIB: a real libggml-cpu.so,
#   or for no_devices libggml-rpc.so)
set -uo pipefail
case_name=$1 standin=$2 plugin=$3 real=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
case $case_name in
    self)       target=$plugin expect=is_standin ;;
    copy)       target=$work/libggml-other.so expect=is_standin; cp "$plugin" "$target" ;;
    truncated)  target=$work/libggml-cpu.so expect=bad_elf; head -c 100000 "$real" >"$target" ;;
    no_devices) target=$real expect=no_devices ;;
    *) echo "unknown case $case_name"; exit 2 ;;
esac
out=$(GGML_STANDIN_MODE=interpose GGML_STANDIN_REAL=$target timeout -s KILL 5 "$standin" devices --plugin "$plugin" 2>&1)
rc=$?
echo "$out" | grep -v '^log_config' | head -8
if (( rc == 137 )); then echo "FAIL: standin devices did not return within 5 s"; exit 1; fi
if (( rc != 0 )); then echo "FAIL: exit $rc"; exit 1; fi
if ! grep -q "cannot interpose ($expect: " <<<"$out"; then echo "FAIL: no '$expect' typed error"; exit 1; fi
if ! grep -Eq '^mode: +standalone' <<<"$out" || ! grep -q STANDIN_HOST0 <<<"$out"; then
    echo "FAIL: did not fall back to standalone"; exit 1
fi
echo "loader fault $case_name: $expect, standalone fallback: ok"
