"""Package metadata: one version, the license, the changelog, the shipped scenarios."""

from __future__ import annotations

import tomllib
from pathlib import Path

import dbrig
from dbrig.host import probe

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_version_is_written_once_in_dbrig_init() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dbrig.__version__"}


def test_every_run_records_the_version() -> None:
    assert probe.host()["dbrig"] == dbrig.__version__  # saved as run.json environment.host


def test_the_changelog_has_the_current_version_and_an_unreleased_section() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "\n## Unreleased\n" in changelog
    assert f"\n## {dbrig.__version__}\n" in changelog


def test_the_license_is_mit_in_spdx_form_with_its_file() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the dbrig authors\n")
    # PEP 639's license expression needs setuptools 77; older ones warn or fail.
    assert "setuptools>=77" in PYPROJECT["build-system"]["requires"]


def test_the_scenarios_folder_is_package_data_through_a_relative_symlink() -> None:
    link = REPO / "src" / "dbrig" / "scenarios"
    assert link.is_symlink()
    assert link.readlink() == Path("../../scenarios")  # relative: valid in every clone
    assert "scenarios/**/*" in PYPROJECT["tool"]["setuptools"]["package-data"]["dbrig"]
