#!/usr/bin/env bash
# The test command behind `make test` and CI. pytest exits 5 when it collected
# no test at all: that is a broken suite, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check src tests benchmarks || exit 1
.venv/bin/pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "run-tests: pytest collected no tests: failing" >&2
  exit 1
fi
exit $rc
