"""The wheel, as a user outside the checkout gets it: built, installed into a fresh
virtualenv, and run from a folder that is not the checkout.

The wheel is built from a copy of the checkout (so no build/ or egg-info lands in it,
and the src/dbrig/scenarios symlink is copied as a link: what is tested is what a
clone builds). pip's build isolation fetches setuptools>=77 (PyPI or pip's cache);
the test is skipped when neither is reachable.

The fresh virtualenv gets dbrig's dependencies through a .pth file naming the test
runner's own site-packages instead of downloading pandas, scipy and matplotlib again:
that keeps the test seconds long and offline-safe, and `--no-deps` keeps pip from
reaching for them. A .pth line only appends a folder to sys.path (the editable
dbrig's own .pth there is not processed), so `import dbrig` finds the installed wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from dbrig import __version__ as dbrig_version

REPO = Path(__file__).resolve().parents[2]
COPIED = ("pyproject.toml", "README.md", "LICENSE", "src", "scenarios")


def sh(args: list[str | Path], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "checkout"
    source.mkdir()
    for name in COPIED:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(
                path,
                source / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
            )
        else:
            shutil.copy2(path, source / name)
    assert (source / "src" / "dbrig" / "scenarios").is_symlink()
    # A file a scenario names relative to itself (a Lua script) in a subfolder ships too.
    (source / "scenarios" / "lua").mkdir(exist_ok=True)
    (source / "scenarios" / "lua" / "beside-a-scenario.lua").write_text("-- shipped\n")
    dist = tmp_path / "dist"
    built = sh(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, "-v", source], source
    )
    log = built.stdout + built.stderr
    if built.returncode != 0 and "Could not find a version that satisfies" in log:
        pytest.skip("setuptools>=77 is neither on PyPI (offline?) nor in pip's cache")
    assert built.returncode == 0, log[-3000:]
    assert "SetuptoolsDeprecationWarning" not in log, log[-3000:]
    (wheel,) = dist.glob("dbrig-*.whl")
    return wheel


def fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    made = sh([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = sh([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path)
    Path(site.stdout.strip(), "runner-dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )
    return venv


@pytest.mark.integration
def test_the_wheel_carries_the_scenarios_and_runs_them_outside_the_checkout(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.name for p in (REPO / "scenarios").iterdir() if p.is_file())
    in_wheel = [n.removeprefix("dbrig/scenarios/") for n in names if "/scenarios/" in n]
    assert sorted(n for n in in_wheel if "/" not in n) == shipped
    assert "lua/beside-a-scenario.lua" in in_wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: MIT" in zipfile.ZipFile(wheel).read(metadata).decode()

    venv = fresh_venv(tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    installed = sh([*pip, "install", "--no-deps", "--no-index", "--quiet", wheel], tmp_path)
    assert installed.returncode == 0, installed.stderr
    dbrig = venv / "bin" / "dbrig"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    where = sh([venv / "bin" / "python", "-c", "import dbrig; print(dbrig.__file__)"], elsewhere)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

    version = sh([dbrig, "--version"], elsewhere)
    assert version.returncode == 0
    assert version.stdout.strip() == f"dbrig, version {dbrig_version}"

    listed = sh([dbrig, "examples"], elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(
        name.removesuffix(".yaml") for name in shipped if name.endswith(".yaml")
    )  # by name: "durability" before "durability-loss" (the files sort the other way)

    copied = sh([dbrig, "examples", "copy", "quickstart"], elsewhere)
    assert copied.returncode == 0, copied.stderr
    assert (elsewhere / "quickstart.yaml").read_bytes() == (
        REPO / "scenarios" / "quickstart.yaml"
    ).read_bytes()
    again = sh([dbrig, "examples", "copy", "quickstart"], elsewhere)
    assert again.returncode == 2
    assert "already exists" in again.stderr

    (elsewhere / "quickstart.yaml").unlink()  # else the file would win over the shipped name
    dry = sh([dbrig, "run", "quickstart", "--dry-run"], elsewhere)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("scenario quickstart:")
    assert "running the shipped scenario quickstart" in dry.stderr
    assert str(venv) in dry.stderr  # it ran the copy inside the installed package
    assert sorted(p.name for p in elsewhere.iterdir()) == []
