#!/bin/sh
# The libsw demo: build the library and show it at work.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
sw_need $SW_C_PKGS
sw_build _build/demo
make -C _build/demo -s examples/demo_boundary >/dev/null
_build/demo/examples/demo_boundary
