# Two commands on a fresh Debian machine: `make demo` and `make test`.
# Each does all of its own set-up: Debian packages (when missing), a virtualenv,
# and dbrig installed into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dbrig-installed
# linux-perf records the CPU profiles a scenario asks for (sampling.profile, docs/profiling.md).
SYSTEM_PACKAGES := mariadb-server mariadb-client sysbench stress-ng linux-perf
# chromium opens the HTML report in the browser test (no browser download); xfsprogs
# makes an XFS loop mount for the reflink test; openssh-server is the throwaway sshd on
# 127.0.0.1 that the remote-client tests reach over ssh (its client comes with it).
TEST_PACKAGES := chromium xfsprogs openssh-server

.PHONY: demo test lint system-packages test-packages clean old-server

demo: system-packages $(STAMP)
	$(BIN)/dbrig run scenarios/quickstart.yaml

test: system-packages test-packages $(STAMP)
	scripts/run-tests.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# Debian's previous MariaDB build, unpacked (not installed) into .servers/<version>/
# for scenarios/upgrade-check.yaml; see docs/upgrade-check.md.
old-server:
	scripts/fetch-old-mariadb.sh

test-packages:
	@scripts/ensure-system-packages.sh $(TEST_PACKAGES)

system-packages:
	@scripts/ensure-system-packages.sh $(SYSTEM_PACKAGES)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache
