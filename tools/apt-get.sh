#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# apt-get that waits for another apt or dpkg instead of failing (see
# sw_apt_get in tools/deps.sh), for scripts that do not source deps.sh:
#   sh tools/apt-get.sh update -q; sh tools/apt-get.sh install -y PACKAGE...
. "$(dirname "$0")/deps.sh"
sw_apt_get "$@"
