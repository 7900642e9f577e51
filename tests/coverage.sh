#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Line coverage of libsw/ by the C suite, with gcovr.
# Usage: tests/coverage.sh [BUILD_DIR] (default _build/coverage)
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
sw_need $SW_C_PKGS gcovr
build=${1:-_build/coverage}
sw_build "$build" CFLAGS="-O0 -g --coverage -fprofile-update=atomic" LDFLAGS="--coverage"
find "$build" -name '*.gcda' -delete
make -C "$build" -s -j"$(nproc)" check >/dev/null
gcovr --gcov-ignore-parse-errors --root . --filter 'libsw/' --object-directory "$build" --print-summary --txt "$build/coverage.txt" | tail -3
echo "per-file report: $build/coverage.txt"
