#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run the unit test programs under valgrind memcheck: any error or leak fails.
# Usage: tests/valgrind.sh BUILD_DIR
set -eu
build=${1:-_build/plain}
make -C "$build" -s -j"$(nproc)" check TESTS= >/dev/null
status=0
for t in check_errors check_leap_array check_variants check_metric check_sliding_view \
         check_node check_limiter check_registry check_plugin check_alloc check_hot_path \
         check_breaker check_rules check_keyed_cancel check_keyed_damage check_cancel; do
  [ -x "$build/tests/$t" ] || continue
  if ! CK_FORK=no "$build/libtool" --mode=execute valgrind -q --error-exitcode=99 \
       --leak-check=full --errors-for-leak-kinds=definite "$build/tests/$t" >/dev/null 2>"$build/tests/$t.valgrind"; then
    echo "valgrind: $t failed"; cat "$build/tests/$t.valgrind"; status=1
  else
    echo "valgrind: $t clean"
  fi
done
exit $status
