"""Shared set-up for the integration suite: real MariaDB, real sysbench, real stress-ng.

Nothing is mocked. Every test gets its own short TMPDIR (the sandbox puts its unix
socket there) and an environment tag that every process it starts inherits, even
sysbench and stress-ng, whose command lines never mention the test's directory.
When a test body ends, any process still alive that mentions the test's ``tmp_path``
on its command line, or carries its tag, is killed and the test FAILS.

Fixtures must not own processes: the check runs before fixtures are torn down.

Every test's ``dbrig run`` shares one snapshot cache per pytest worker
(``DBRIG_SNAPSHOT_CACHE``): the tiny data sets most tests use are initialised and
prepared once per worker, then copied from the cache (its key, binary + data set +
shaping settings, keeps a hit correct). A test about the load itself (init, prepare,
their timings or output) is marked ``fresh_data_sets`` and runs without it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbrig.server.cache import ENV_DIR
from tests.integration.helpers import LEAK_TAG, kill_leftovers
from tests.integration.sshd import SSHD, Sshd, start_sshd, stop_sshd


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
        if tmp_path is not None:
            leaked = kill_leftovers(tmp_path)
            if leaked:
                pytest.fail("processes left running (killed now):\n  " + "\n  ".join(leaked))


@pytest.fixture(scope="session", autouse=True)
def session_tmp() -> Iterator[Path]:
    """A TMPDIR of this worker's own for what runs before a test's ``short_tmp``: module
    fixtures that initialise or prepare a template datadir. A server starting removes the
    temporary files it finds in its tmpdir, another server's initialisation files among
    them, so a shared /tmp made those inits fail now and then."""
    short = Path(tempfile.mkdtemp(prefix="dis-", dir="/tmp"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(short))
        patch.setattr(tempfile, "tempdir", str(short))
        yield short
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(autouse=True)
def short_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A per-test TMPDIR short enough for unix sockets, and the leftover-process tag."""
    short = Path(tempfile.mkdtemp(prefix="dit-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(short))
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    monkeypatch.setenv(LEAK_TAG, str(tmp_path))
    yield short
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_snapshot_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The snapshot cache of this worker's session (dbrig creates and marks it)."""
    return tmp_path_factory.getbasetemp() / "snapshot-cache"


@pytest.fixture(autouse=True)
def snapshot_cache_of_the_session(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs take their data sets from the worker's snapshot cache, unless the test is
    marked ``fresh_data_sets`` (then every data set is initialised and prepared)."""
    monkeypatch.delenv(ENV_DIR, raising=False)
    if request.node.get_closest_marker("fresh_data_sets") is None:
        monkeypatch.setenv(ENV_DIR, str(request.getfixturevalue("shared_snapshot_cache")))


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    """A throwaway sshd on 127.0.0.1 (key login as root) for the remote-host tests."""
    if not SSHD.exists():
        pytest.skip("openssh-server is not installed (/usr/sbin/sshd)")
    server = start_sshd()
    try:
        yield server
    finally:
        stop_sshd(server)


@pytest.fixture(scope="session")
def second_sshd() -> Iterator[Sshd]:
    """Another host for the tests that need two: its own sshd, keys and address
    (127.0.0.2)."""
    if not SSHD.exists():
        pytest.skip("openssh-server is not installed (/usr/sbin/sshd)")
    server = start_sshd(listen="127.0.0.2")
    try:
        yield server
    finally:
        stop_sshd(server)
