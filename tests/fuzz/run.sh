#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer harness (clang, -fsanitize=fuzzer,address,undefined)
# against the library sources and run it on the seed corpus for SECONDS
# (default 30). New inputs go to a scratch corpus, not the repository.
# Usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR]   (BUILD_DIR: a configured
# build, for <sw/version.h>; default _build/plain)
# A longer run: tests/fuzz/run.sh 3600   (or -jobs=2 by hand, see docs/reliability.md)
set -eu
secs=${1:-30}
build=${2:-_build/plain}
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# the 16-byte CAS flag configure found (-mcx16 on x86-64)
cas16=$(sed -n 's/^SW_CAS16_FLAGS = //p' "$build/Makefile")
clang -std=c11 -D_GNU_SOURCE -DSW_BUILDING -O1 -g -fsanitize=fuzzer,address,undefined $cas16 \
  -fno-sanitize-recover=all -I"$top/libsw" -I"$build/libsw" \
  "$top/tests/fuzz/fuzz_metric.c" "$top"/libsw/*.c "$top"/libsw/keyed/*.c "$top"/libsw/breaker/*.c \
  -lm -lpthread -o "$out/fuzz_metric"
mkdir -p "$out/corpus"
cp "$top"/tests/fuzz/corpus/* "$out/corpus/"
"$out/fuzz_metric" -max_total_time="$secs" -max_len=4096 -timeout=10 -print_final_stats=1 \
  "$out/corpus" 2>&1 | grep -E "^#|stat::|ERROR|mismatch|SUMMARY|Done" | tail -12
