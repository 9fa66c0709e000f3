#!/usr/bin/env bash
# Runs a command that must die of a signal and print WORD on stderr first.
# Usage: expect_crash.sh WORD command...
word=$1
shift
out=$("$@" 2>&1)
rc=$?
echo "$out" | tail -5
if (( rc < 128 )); then
    echo "expected death by signal, got exit $rc"
    exit 1
fi
if ! grep -q "$word" <<<"$out"; then
    echo "the crash report does not name '$word'"
    exit 1
fi
echo "died with signal $((rc - 128)) after naming $word: ok"
