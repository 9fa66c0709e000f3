#!/usr/bin/env bash
# Runs COMMAND twice, under two environments, and requires the same standard
# output from both; the second run's standard error must match PATTERN (the
# proof that the feature under test was exercised).
# Usage: compare_runs.sh "VAR=1 ..." "VAR=2 ..." PATTERN COMMAND...
set -uo pipefail
env_a=$1 env_b=$2 pattern=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
env $env_a "$@" >"$tmp/a.out" 2>"$tmp/a.err" || { echo "first run failed:"; tail -20 "$tmp/a.err"; exit 1; }
env $env_b "$@" >"$tmp/b.out" 2>"$tmp/b.err" || { echo "second run failed:"; tail -20 "$tmp/b.err"; exit 1; }
if ! cmp -s "$tmp/a.out" "$tmp/b.out"; then
    echo "outputs differ between [$env_a] and [$env_b]:"
    diff "$tmp/a.out" "$tmp/b.out" | head -20
    exit 1
fi
if ! grep -E -q "$pattern" "$tmp/b.err"; then
    echo "second run's log does not match '$pattern':"
    tail -20 "$tmp/b.err"
    exit 1
fi
echo "same output ($(wc -c <"$tmp/a.out") bytes); $(grep -E -o "$pattern.*" "$tmp/b.err" | tail -1)"
