#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Random-kill stress of a shared breaker (tests/stress/breaker_kill.c): 4
# processes on one breaker segment, one SIGKILLed (an eighth of them
# SIGSTOPped first) every 1-10 ms and started again; prints kills, pauses,
# transitions and wedges (a breaker refusing everyone for longer than
# open_for + probe_timeout + 1 s), and fails on any wedge.
# Usage: tests/stress/breaker-kill.sh [BUILD_DIR] [--kills N | --seconds S] [--calls N]
#   default: 5,000 kills with 1 half-open call, then 5,000 with 2
#   (tests/run-all.sh runs a short one: --seconds 30)
set -eu
cd "$(dirname "$0")/../.."
b=${1:-_build/plain}
[ $# -gt 0 ] && shift
make -C "$b" -s tests/stress/breaker_kill >/dev/null
if [ $# -gt 0 ]; then
  "$b/tests/stress/breaker_kill" "$@"
else
  "$b/tests/stress/breaker_kill" --kills 5000 --calls 1
  "$b/tests/stress/breaker_kill" --kills 5000 --calls 2
fi
