#!/usr/bin/env bash
# The test command behind `make test` and CI. pytest exits 5 when it collected
# no test at all: that is a broken suite, not a pass.
#
# Two pytest runs: first the tests marked `serial` (they measure CPU or timing that
# a test beside them would skew) alone, then the rest on two workers (pytest-xdist).
# Most of an integration test is waiting on a server or a fixed-length trial, so two
# workers halve the wall time even on two cores. `--dist loadfile` keeps each test
# file on one worker: a module-scoped fixture is built once, and tests of one file
# that change host-wide settings (the I/O scheduler) never run at the same time.
set -uo pipefail
cd "$(dirname "$0")/.."
WORKERS="${DBRIG_TEST_WORKERS:-2}"
.venv/bin/ruff check src tests benchmarks || exit 1

.venv/bin/pytest -m serial "$@"
serial_rc=$?
.venv/bin/pytest -n "$WORKERS" --dist loadfile -m "not serial" "$@"
rc=$?

# 5 = no test collected: fine for one of the two runs (e.g. a path with no serial
# test), a broken suite when both collected nothing.
if [ $serial_rc -eq 5 ] && [ $rc -eq 5 ]; then
  echo "run-tests: pytest collected no tests: failing" >&2
  exit 1
fi
[ $serial_rc -eq 5 ] && serial_rc=0
[ $rc -eq 5 ] && rc=0
if [ $serial_rc -ne 0 ]; then
  exit $serial_rc
fi
exit $rc
