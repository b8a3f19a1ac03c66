"""``dbrig doctor``: one apt-get line for whatever is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.cli import main
from dbrig.commands.doctor import REFLINK_NO, REFLINK_YES, Check, install_line


def test_one_install_line_names_each_missing_package_once() -> None:
    found = [
        Check("server", False, "mariadbd not found", package="mariadb-server"),
        Check("sysbench", True, "1.0.20"),
        Check("mysqlslap", False, "not found", False, package="mariadb-client"),
        Check("other", False, "not found", False, package="mariadb-client"),
        Check("work dir", False, "NOT writable"),
    ]
    assert install_line(found, is_root=True) == "apt-get install -y mariadb-server mariadb-client"
    assert install_line(found, is_root=False) == (
        "sudo apt-get install -y mariadb-server mariadb-client"
    )


def test_nothing_missing_no_install_line() -> None:
    assert install_line([Check("sysbench", True, "1.0.20", package="sysbench")], True) is None


def test_doctor_prints_the_install_line_for_tools_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # /usr/bin is where the tools are
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "--workdir", str(tmp_path / "runs")])
    assert exited.value.code == 2  # sysbench is required
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("install what is missing with: ")
    assert "apt-get install -y " in last
    assert "sysbench" in last.split()
    assert "stress-ng" in last.split()  # optional, but missing: in the line too


def test_the_reflink_line_says_a_restore_copies_only_what_changed() -> None:
    assert "only the files the trial changed" in REFLINK_YES
    assert "full copies" not in REFLINK_NO and "files the trial changed" in REFLINK_NO
    assert "workspace: {image: 20G}" in REFLINK_NO  # where clones come from elsewhere
