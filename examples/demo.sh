#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The libsw demo: build the library and show it at work.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
sw_need $SW_C_PKGS
sw_build _build/demo
make -C _build/demo -s examples/demo_boundary examples/demo_behaviors examples/demo_shared \
  examples/per_client tools/swctl >/dev/null
echo "== 1. The boundary problem: a fixed window against libsw's sliding window"
echo
_build/demo/examples/demo_boundary
echo
echo "== 2. Reject, pacing and warm-up side by side"
echo
_build/demo/examples/demo_behaviors
echo
echo "== 3. One limit, four processes, a shared segment"
echo
seg="sw-demo-$$"
_build/demo/examples/demo_shared "$seg"
echo
echo "  what swctl sees in the segment:"
_build/demo/tools/swctl list "$seg" | sed 's/^/  /'
rm -f "/dev/shm/$seg"
echo
echo "== 4. A limit per client: 250,000 clients through a keyed table for 100,000 at once"
echo
_build/demo/examples/per_client
