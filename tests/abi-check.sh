#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Compare the built library's ABI with the checked-in baseline
# (tests/abi/libsw.abi, written by abidw from abigail-tools). Incompatible
# changes fail; compatible ones (added functions) are reported. When a
# change is intended, follow docs/releasing.md and refresh the baseline:
#   tests/abi-check.sh BUILD_DIR --update
set -eu
build=${1:-_build/plain}
top=$(cd "$(dirname "$0")/.." && pwd)
lib="$build/libsw/.libs/libsw.so"
base="$top/tests/abi/libsw.abi"
if [ "${2:-}" = "--update" ]; then
  abidw --headers-dir "$top/libsw/sw" --out-file "$base" "$lib"
  echo "ABI baseline updated: $base"
  exit 0
fi
set +e
report=$(abidiff --headers-dir1 "$top/libsw/sw" --headers-dir2 "$top/libsw/sw" "$base" "$lib")
rc=$?
set -e
# abidiff's status is a bit field: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
  echo "abidiff failed ($rc):"; echo "$report"; exit 1
fi
if [ $((rc & 8)) -ne 0 ]; then
  echo "INCOMPATIBLE ABI change against $base:"; echo "$report"
  echo "If it is intended: bump the version (docs/releasing.md), then $0 $build --update"
  exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
  echo "compatible ABI change (refresh the baseline when releasing):"; echo "$report" | head -20
fi
echo "ABI check: no incompatible change"
