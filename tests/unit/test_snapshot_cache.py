"""The snapshot cache on plain directories: miss, hit, eviction, interrupted and damaged
entries, a full filesystem, and the key."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from dbrig import ownership
from dbrig.cli import main
from dbrig.commands.cache import cache_max_bytes
from dbrig.errors import ConfigError
from dbrig.run.datasets import data_set_id
from dbrig.run.dryrun import CacheView, describe
from dbrig.scenario import ManagedServer, plan_from_dict
from dbrig.server import cache as sc
from dbrig.server.binary import ServerBinary
from dbrig.server.handles import ManagedServerHandle
from dbrig.tools.registry import workload_for

MiB = 2**20


def snapshot_of(tmp_path: Path, name: str, size: int = MiB, fill: bytes = b"x") -> Path:
    path = tmp_path / "snapshots" / name
    ownership.mark_owned(path, role="snapshot")
    (path / "db").mkdir()
    (path / "ibdata1").write_bytes(fill * size)
    (path / "db" / "t.ibd").write_bytes(fill * 1000)
    return path


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def key(data_set: str, **settings: str) -> dict:
    return {"binary": {"mysqld": "/usr/sbin/mariadbd"}, "settings": settings, "data_set": data_set}


def opened(tmp_path: Path, said: list[str], **kwargs: int) -> sc.SnapshotCache:
    kwargs.setdefault("reserve_bytes", 0)
    return sc.SnapshotCache.open(tmp_path / "cache", say=said.append, **kwargs)


def test_a_miss_then_a_hit_gives_back_the_same_files(tmp_path: Path) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    snapshot = snapshot_of(tmp_path, "data-a")
    target = tmp_path / "run2" / "snapshots" / "data-a"
    assert not cache.fetch(key("a"), target) and not target.exists()
    assert cache.store(key("a"), snapshot)
    assert not cache.fetch(key("b"), target)
    assert cache.fetch(key("a"), target)
    assert tree(target) == tree(snapshot) and ownership.is_owned(target)
    assert [e.key for e in cache.entries()] == [key("a")]
    assert said == []


def test_least_recently_used_entries_are_evicted_to_stay_under_the_maximum(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said, max_bytes=int(2.5 * MiB))
    for name in ("a", "b"):
        assert cache.store(key(name), snapshot_of(tmp_path, f"data-{name}"))
    older = cache.root / sc.key_digest(key("a"))
    os.utime(older / "entry.json", (1, 1))  # "a" used long ago
    assert cache.fetch(key("b"), tmp_path / "elsewhere" / "b")
    assert cache.store(key("c"), snapshot_of(tmp_path, "data-c"))
    assert {e.key["data_set"] for e in cache.entries()} == {"b", "c"}
    assert any("evicted" in line for line in said)
    assert not cache.store(key("big"), snapshot_of(tmp_path, "data-big", size=3 * MiB))
    assert "larger than the cache's maximum" in said[-1]


def test_an_entry_left_by_an_interrupted_store_is_never_used_and_is_removed(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    snapshot = snapshot_of(tmp_path, "data-a")
    dead_pid = 2**22 + 12345  # above pid_max's default: never a live process
    abandoned = cache.root / f".incoming-{sc.key_digest(key('a'))}-{dead_pid}"
    ownership.mark_owned(abandoned, role="snapshot-cache-entry")
    (abandoned / "data").mkdir()
    (abandoned / "data" / "ibdata1").write_bytes(b"half")
    assert not cache.fetch(key("a"), tmp_path / "t")
    assert cache.entries() == []
    reopened = opened(tmp_path, said)
    assert not abandoned.exists()
    assert reopened.store(key("a"), snapshot) and reopened.fetch(key("a"), tmp_path / "t")


def test_a_damaged_entry_is_discarded_with_a_warning(tmp_path: Path) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    cache.store(key("a"), snapshot_of(tmp_path, "data-a"))
    stored = cache.root / sc.key_digest(key("a")) / "data" / "ibdata1"
    with open(stored, "r+b") as handle:
        handle.seek(1000)
        handle.write(b"!")
    target = tmp_path / "run2" / "data-a"
    assert not cache.fetch(key("a"), target)
    assert not target.exists() and not target.with_name("data-a.copying").exists()
    assert cache.entries() == [] and "damaged" in said[-1]


def test_a_filesystem_that_would_fill_up_is_never_filled(tmp_path: Path) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said, reserve_bytes=2**62)
    assert not cache.store(key("a"), snapshot_of(tmp_path, "data-a"))
    assert cache.entries() == [] and "would have less than" in said[-1]
    assert [p.name for p in cache.root.iterdir()] == [ownership.MARKER]


def test_a_cache_on_another_filesystem_is_said_once(tmp_path: Path) -> None:
    if not Path("/dev/shm").is_dir() or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the temporary directory")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as other:
        said: list[str] = []
        cache = sc.SnapshotCache.open(Path(other) / "cache", say=said.append, reserve_bytes=0)
        cache.store(key("a"), snapshot_of(tmp_path, "data-a"))
        cache.store(key("b"), snapshot_of(tmp_path, "data-b"))
        cache.fetch(key("a"), tmp_path / "again" / "a")
    assert len([line for line in said if "another filesystem" in line]) == 1


def test_a_folder_dbrig_did_not_make_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("precious")
    with pytest.raises(ConfigError, match="--snapshot-cache"):
        sc.SnapshotCache.open(foreign)
    assert (foreign / "notes.txt").read_text() == "precious"


def test_the_key_follows_the_settings_that_shape_the_files(tmp_path: Path) -> None:
    mysqld = tmp_path / "mariadbd"
    mysqld.write_bytes(b"\x7fELF")
    binary = ServerBinary(mysqld, "mariadb", "10.11.19", "mariadbd Ver 10.11.19", None, None)
    base = {"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "16M"}
    same = sc.key_digest(sc.entry_key(binary, base, "abc"))
    bigger_pool = {**base, "innodb-buffer-pool-size": "1G", "max_connections": 500}
    assert sc.key_digest(sc.entry_key(binary, bigger_pool, "abc")) == same
    for changed in (
        {**base, "innodb_log_file_size": "32M"},
        {**base, "innodb_page_size": "8K"},
        {**base, "character_set_server": "latin1"},
        {**base, "some_setting_dbrig_does_not_know": "1"},
    ):
        assert sc.key_digest(sc.entry_key(binary, changed, "abc")) != same
    assert sc.key_digest(sc.entry_key(binary, base, "other")) != same
    mysqld.write_bytes(b"\x7fELF, upgraded")
    assert sc.key_digest(sc.entry_key(binary, base, "abc")) != same


def dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def test_cache_list_and_prune_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = opened(tmp_path, [])
    for name in ("a", "b"):
        cache.store(key(name), snapshot_of(tmp_path, f"data-{name}"))
    code, out, _ = dbrig(["cache", "list", "--snapshot-cache", str(cache.root)], capsys)
    assert code == 0 and "2 entries" in out and "data set a" in out
    code, out, _ = dbrig(["cache", "prune", "--snapshot-cache", str(cache.root)], capsys)
    assert code == 0 and "removed 2 entries" in out
    assert cache.entries() == [] and ownership.is_owned(cache.root)


def test_bad_cache_flags_are_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = dbrig(["cache", "list", "--snapshot-cache", str(tmp_path / "nope")], capsys)
    assert code == 2 and "--snapshot-cache" in err and "no such directory" in err
    opened(tmp_path, [])
    args = ["cache", "prune", "--snapshot-cache", str(tmp_path / "cache"), "--keep", "lots"]
    code, _, err = dbrig(args, capsys)
    assert code == 2 and "--keep" in err
    with pytest.raises(ConfigError, match="--snapshot-cache-max"):
        cache_max_bytes("fifty")


def test_the_run_checks_its_cache_flags_before_anything_even_in_a_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sc.ENV_DIR, raising=False)
    monkeypatch.delenv(sc.ENV_MAX, raising=False)
    dry = ["run", "quickstart", "--dry-run", "--out", str(tmp_path / "runs")]
    code, _, err = dbrig([*dry, "--snapshot-cache-max", "5Q"], capsys)
    assert code == 2 and "--snapshot-cache-max: expected a size" in err
    code, _, err = dbrig([*dry, "--snapshot-cache-max", "5G"], capsys)
    assert code == 2 and "no snapshot cache to bound" in err
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not dbrig's")
    code, _, err = dbrig([*dry, "--snapshot-cache", str(foreign)], capsys)
    assert code == 2 and "not made by dbrig" in err
    assert not ownership.is_owned(foreign)
    monkeypatch.setenv(sc.ENV_MAX, "lots")
    code, _, err = dbrig(dry, capsys)
    assert code == 2 and f"{sc.ENV_MAX}: expected a size" in err
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_says_which_data_sets_the_cache_holds_and_creates_nothing(
    tmp_path: Path,
) -> None:
    mysqld = tmp_path / "mariadbd"
    mysqld.write_bytes(b"\x7fELF")
    binary = ServerBinary(mysqld, "mariadb", "10.11.19", "mariadbd Ver 10.11.19", None, None)
    plan = plan_from_dict(
        {
            "name": "d",
            "server": {"config": {"innodb_log_file_size": "16M"}},
            "workload": {"sysbench": {"tables": 1, "table_size": 100, "time": 5}},
        },
        seed=1,
    )
    _, digest = data_set_id(workload_for(plan.cells[0].scenario.workload))
    root = tmp_path / "cache"
    view = CacheView(root, {"default": binary})
    assert view.line(plan, "default", digest) == (
        f"snapshot cache: no entry yet: prepared, then kept in {root}"
    )
    assert not root.exists()
    said: list[str] = []
    entry_key = sc.entry_key(binary, {"innodb_log_file_size": "16M"}, digest)
    opened(tmp_path, said).store(entry_key, snapshot_of(tmp_path, f"data-{digest}"))
    line = view.line(plan, "default", digest)
    assert line is not None and line.startswith(f"snapshot cache: entry {sc.key_digest(entry_key)}")
    assert line.endswith("no init, no prepare")
    assert "  " + line in list(describe(plan, view))
    assert CacheView(root, {}).line(plan, "default", digest) is None  # no server binary
    record = root / sc.key_digest(entry_key) / "entry.json"
    record.write_text(record.read_text()[:20])  # cut short: the folder stays dbrig's
    line = view.line(plan, "default", digest)
    assert line is not None and line.startswith(f"snapshot cache: entry {record} is unreadable")
    assert line.endswith("prepared again, and the entry replaced")


def corrupt_entry_of(cache: sc.SnapshotCache, tmp_path: Path, data_set: str) -> Path:
    """An entry stored whole, then its entry.json cut short (a crash of the filesystem, an
    editor): the folder is dbrig's, its record unreadable."""
    assert cache.store(key(data_set), snapshot_of(tmp_path, f"data-{data_set}"))
    record = cache.root / sc.key_digest(key(data_set)) / "entry.json"
    record.write_text('{"key": {"binary"')
    return record


def test_a_corrupt_entry_is_said_once_and_replaced_by_the_next_store(tmp_path: Path) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    record = corrupt_entry_of(cache, tmp_path, "a")
    target = tmp_path / "run2" / "data-a"
    assert not cache.fetch(key("a"), target) and not target.exists()
    assert not cache.fetch(key("a"), target)
    warned = [line for line in said if str(record) in line]
    assert len(warned) == 1 and "unreadable" in warned[0], said
    found = sc.corrupt_entry(cache.root, key("a"))  # what a dry run can name
    assert found is not None and found.record == record and "JSONDecodeError" in found.problem
    assert cache.store(key("a"), snapshot_of(tmp_path, "data-a2"))
    assert sc.corrupt_entry(cache.root, key("a")) is None
    assert cache.fetch(key("a"), target)
    assert [e.key for e in cache.entries()] == [key("a")] and cache.corrupt() == []


def test_a_corrupt_entry_counts_against_the_maximum_and_is_evicted_first(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said, max_bytes=int(1.5 * MiB))
    corrupt_entry_of(cache, tmp_path, "a")
    assert cache.total_bytes() > MiB  # its MiB are on disk, so they count
    assert cache.store(key("b"), snapshot_of(tmp_path, "data-b"))
    assert cache.corrupt() == [] and [e.key["data_set"] for e in cache.entries()] == ["b"]
    assert any("evicted" in line and "corrupt" in line for line in said), said


def test_a_corrupt_entry_is_evicted_first_to_keep_the_filesystem_from_filling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    corrupt_entry_of(cache, tmp_path, "a")
    assert cache.store(key("b"), snapshot_of(tmp_path, "data-b"))

    def usage(path: Path) -> sc.shutil._ntuple_diskusage:  # room for one entry of the two
        used = sc.tree_bytes(cache.root)
        return sc.shutil._ntuple_diskusage(int(2.6 * MiB), used, int(2.6 * MiB) - used)

    monkeypatch.setattr(sc.shutil, "disk_usage", usage)
    assert cache.store(key("c"), snapshot_of(tmp_path, "data-c"))
    assert cache.corrupt() == []
    assert {e.key["data_set"] for e in cache.entries()} == {"b", "c"}


def test_cache_list_shows_a_corrupt_entry_and_prune_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = opened(tmp_path, [])
    record = corrupt_entry_of(cache, tmp_path, "a")
    cache.store(key("b"), snapshot_of(tmp_path, "data-b"))
    code, out, _ = dbrig(["cache", "list", "--snapshot-cache", str(cache.root)], capsys)
    assert code == 0, out
    assert "2 entries (1 corrupt)" in out and "data set b" in out
    corrupt_line = next(line for line in out.splitlines() if "corrupt:" in line)
    assert str(record) in corrupt_line
    code, out, _ = dbrig(["cache", "prune", "--snapshot-cache", str(cache.root)], capsys)
    assert code == 0 and "removed 2 entries" in out
    assert not record.parent.exists() and cache.entries() == []


def test_a_folder_without_dbrigs_marker_in_the_cache_is_never_removed(tmp_path: Path) -> None:
    said: list[str] = []
    cache = opened(tmp_path, said)
    foreign = cache.root / sc.key_digest(key("a"))
    foreign.mkdir()
    (foreign / "notes.txt").write_text("someone else's")
    assert not cache.store(key("a"), snapshot_of(tmp_path, "data-a"))
    assert cache.prune() == [] and cache.corrupt() == []
    assert (foreign / "notes.txt").read_text() == "someone else's"
    assert any(str(foreign) in line and "not made by dbrig" in line for line in said), said


def test_a_hit_in_a_clone_workspace_makes_the_servers_home_for_its_my_cnf(
    tmp_path: Path,
) -> None:
    """With a workspace the snapshots live on its filesystem, not in the server's home; a
    hit skips the init that made home, so the first start found no folder for my.cnf."""
    mysqld = tmp_path / "mariadbd"
    mysqld.write_bytes(b"\x7fELF")
    binary = ServerBinary(mysqld, "mariadb", "10.11.19", "mariadbd Ver 10.11.19", None, None)
    spec = ManagedServer(config={"innodb_log_file_size": "16M"})
    cache = opened(tmp_path, [])
    assert cache.store(sc.entry_key(binary, dict(spec.config), "abc"), snapshot_of(tmp_path, "d"))
    home, workspace = tmp_path / "run" / "servers" / "db", tmp_path / "workspace" / "db"
    handle = ManagedServerHandle("db", spec, binary, home, cache, data_home=workspace)
    assert handle.take_from_cache("abc")
    assert home.is_dir() and (workspace / "snapshots" / "data-abc").is_dir()
