"""A start whose chosen port was taken before mariadbd bound it: found in the error log
(real MariaDB 10.11 captures), so the start can try another port."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.server.sandbox import port_was_taken

MARIADB = Path(__file__).parent.parent / "fixtures" / "mariadb" / "10.11"


def test_a_start_that_lost_its_port_says_so_in_its_error_log() -> None:
    assert port_was_taken((MARIADB / "port_taken.err").read_text())


@pytest.mark.parametrize(
    "name", ["clean_start_after_term.err", "crash_recovery_kill9.err", "shutdown_term.err"]
)
def test_other_starts_and_stops_did_not_lose_their_port(name: str) -> None:
    assert not port_was_taken((MARIADB / name).read_text())


def test_only_an_error_line_counts() -> None:
    assert not port_was_taken("2026-11-24  6:20:43 0 [Note] Address already in use? no")
    assert not port_was_taken("")
