"""A Lua workload as a folder: its files and digest, the argv, the probe's text and its
parsing, the data-set key, normal errors (pure: no sysbench runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.endpoint import no_server_endpoint
from dbrig.errors import ConfigError
from dbrig.scenario import plan_from_dict
from dbrig.tools import lua_script
from dbrig.tools.sysbench import SysbenchParams, SysbenchTool, split_normal_errors

# What the probe printed for Percona-Lab/sysbench-tpcc (tpcc.lua) on sysbench 1.0.20.
PERCONA_PROBE = """\
sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

dbrig-probe command cleanup
dbrig-probe command prepare
dbrig-probe command check
dbrig-probe done
"""
# And for it with tpcc_common.lua left out (the error's lines joined by \\1).
MISSING = (
    "dbrig-probe error {root}/tpcc.lua:21: module 'tpcc_common' not found:\1"
    "\tno field package.preload['tpcc_common']\1\tno file '{root}/tpcc_common.lua'\1"
    "\tno file '{root}/tpcc_common/init.lua'\1\tno file './tpcc_common.lua'\n"
)


def workload(tmp_path: Path, **extra: object) -> Path:
    """main.lua requiring lib.lua, and a notes file that is not Lua."""
    folder = tmp_path / "w"
    folder.mkdir(exist_ok=True)
    (folder / "main.lua").write_text('require("lib")\nfunction event() end\n')
    (folder / "lib.lua").write_text("function prepare() end\n")
    (folder / "notes.txt").write_text("not a module\n")
    return folder / "main.lua"


def tool(script: Path, **block: object) -> SysbenchTool:
    return SysbenchTool(SysbenchParams(script=str(script), **block))


def test_the_folders_lua_files_are_the_workload(tmp_path: Path) -> None:
    main = workload(tmp_path)
    (main.parent / "sub").mkdir()
    (main.parent / "sub" / "x.lua").write_text("")
    (main.parent / ".git").mkdir()
    (main.parent / ".git" / "hook.lua").write_text("")
    files = lua_script.read_script_files(main)
    assert files.files == ("lib.lua", "main.lua", "sub/x.lua")
    assert files.root == main.parent.resolve() and files.main == "main.lua"
    assert files.name == f"{files.digest[:12]}-w"


def test_files_lists_them_and_refuses_what_is_outside(tmp_path: Path) -> None:
    main = workload(tmp_path)
    assert lua_script.read_script_files(main, ["lib.lua"]).files == ("lib.lua", "main.lua")
    with pytest.raises(ValueError, match="outside the script's folder"):
        lua_script.read_script_files(main, ["../elsewhere.lua"])
    with pytest.raises(ValueError, match="no such file"):
        lua_script.read_script_files(main, ["gone.lua"])


def test_editing_a_sibling_changes_the_data_set_key_and_a_comment_the_need_nothing(
    tmp_path: Path,
) -> None:
    main = workload(tmp_path)
    before = tool(main).data_set_key()
    (main.parent / "notes.txt").write_text("edited, not Lua\n")
    assert tool(main).data_set_key() == before
    (main.parent / "lib.lua").write_text("function prepare() end -- edited\n")
    assert tool(main).data_set_key() != before
    main.write_text("-- sysbench.sql.driver() in a comment\n" + main.read_text())
    assert tool(main, needs_server=False).needs_server is False
    assert tool(main).needs_server is True  # undeclared: a server, like any database workload


def test_the_argv_runs_the_copy_with_its_folder_on_lua_path_and_no_server_reaches_none(
    tmp_path: Path,
) -> None:
    main = workload(tmp_path)
    copy = tmp_path / "run" / "inputs" / "abc-w"
    at_copy = SysbenchTool(tool(main, needs_server=False).at_copy(copy))
    endpoint = no_server_endpoint(tmp_path / "work", "sbtest")
    argv = at_copy.run_argv(endpoint, Path("/usr/bin/sysbench"), 0)
    assert argv[:5] == [
        "env",
        f"LUA_PATH={copy}/?.lua;{copy}/?/init.lua;;",
        "/usr/bin/sysbench",
        str(copy / "main.lua"),
        "run",
    ]
    assert f"--mysql-socket={tmp_path}/work/no-server/mysqld.sock" in argv
    assert "--mysql-host=127.0.0.1" in argv and "--mysql-port=1" in argv
    assert at_copy.data_set_key() == tool(main, needs_server=False).data_set_key()
    assert at_copy.search_path(copy) == {"LUA_PATH": f"{copy}/?.lua;{copy}/?/init.lua;;"}


def test_the_probe_is_asked_unless_the_commands_are_declared(tmp_path: Path) -> None:
    main = workload(tmp_path)
    probe = tool(main).commands_probe(Path("/usr/bin/sysbench"), tmp_path / "c", tmp_path / "e")
    assert probe is not None
    assert probe.argv == [
        "env",
        "-C",
        f"{tmp_path}/e",
        f"LUA_PATH={lua_script.lua_path(tmp_path / 'c')}",
        "/usr/bin/sysbench",
    ]
    assert f'pcall(dofile, "{tmp_path}/c/main.lua")' in probe.stdin
    assert 'sysbench.cmdline.command = "help"' in probe.stdin
    declared = tool(main, commands=["prepare"])
    assert declared.commands_probe(Path("sysbench"), tmp_path, tmp_path) is None


def test_percona_tpccs_probe_gives_prepare_cleanup_and_check(tmp_path: Path) -> None:
    main = workload(tmp_path)
    params = tool(main).probed(PERCONA_PROBE, tmp_path / "copy")
    assert params.commands == ("prepare", "cleanup", "check")
    probed = SysbenchTool(params)
    endpoint = no_server_endpoint(tmp_path, "sbtest")
    assert probed.prepare_argv(endpoint, Path("sysbench"))[4] == "prepare"
    assert probed.cleanup_argv(endpoint, Path("sysbench"))[4] == "cleanup"
    assert probed.check_argv(endpoint, Path("sysbench"))[4] == "check"
    none = SysbenchTool(tool(main).probed("dbrig-probe done\n", tmp_path))
    assert none.prepare_argv(endpoint, Path("sysbench")) is None
    assert none.check_argv(endpoint, Path("sysbench")) is None


def test_a_missing_module_is_one_line_naming_it_where_and_files(tmp_path: Path) -> None:
    main = workload(tmp_path)
    copy = tmp_path / "copy"
    with pytest.raises(ConfigError) as caught:
        tool(main).probed(MISSING.format(root=copy), copy)
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith("workload.sysbench.script: tpcc.lua:21: module 'tpcc_common'")
    assert f"looked in {main.parent.resolve()}/tpcc_common.lua" in message  # not the copy
    assert "files:" in message
    with pytest.raises(ConfigError, match="could not load it"):
        tool(main).probed("FATAL: something else\n", copy)


def test_a_missing_module_in_a_run_is_the_failure_reason(tmp_path: Path) -> None:
    main = workload(tmp_path)
    output = (
        "sysbench 1.0.20\n\nFATAL: /x/main.lua:1: module 'lib2' not found:\n"
        "\tno field package.preload['lib2']\n\tno file '/x/lib2.lua'\n"
    )
    reason = tool(main).analyse(output, 1).reason
    assert reason is not None and "module 'lib2' not found" in reason and "files:" in reason


def test_normal_errors_are_taken_out_of_errors_per_s() -> None:
    metrics = {"ignored_errors": 120.0, "ignored_errors_per_s": 12.0, "transactions": 10000.0}
    split = split_normal_errors(metrics, 0.01)  # 100 of the 120 are the script's own
    assert split["normal_errors_per_s"] == pytest.approx(10.0)
    assert split["errors_per_s"] == pytest.approx(2.0)
    none = {**metrics, "ignored_errors": 0.0, "ignored_errors_per_s": 0.0}
    assert split_normal_errors(none, 0.01) == {"normal_errors_per_s": 0.0, "errors_per_s": 0.0}
    assert split_normal_errors({}, 0.01) == {}


def test_script_keys_belong_to_scripts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs_server: a key of script:"):
        plan_from_dict(
            {"name": "s", "workload": {"sysbench": {"test": "cpu", "needs_server": False}}}
        )
    main = workload(tmp_path)
    block = {"script": str(main), "needs_server": False}
    scenario = {"name": "s", "server": {}, "workload": {"sysbench": block}}
    with pytest.raises(ConfigError, match="needs no server; remove the server block"):
        plan_from_dict(scenario)


def test_the_shipped_example_copies_with_its_folder_and_loads_there(tmp_path: Path) -> None:
    from dbrig.scenario import load
    from dbrig.scenario.shipped import copy_shipped

    target = copy_shipped("lua-orders", tmp_path)
    params = load(target).scenario.workload.sysbench
    assert params.script == str((tmp_path / "lua-orders" / "orders.lua").resolve())
    assert SysbenchTool(params).input_folder().files == ("orders.lua", "orders_common.lua")
    mine = tmp_path / "again" / "lua-orders" / "orders.lua"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine\n")
    with pytest.raises(ConfigError, match=r"orders\.lua: already exists"):
        copy_shipped("lua-orders", tmp_path / "again")
    assert mine.read_text() == "mine\n"


def test_a_resume_runs_the_kept_copy_and_refuses_files_changed_since(tmp_path: Path) -> None:
    from dbrig.run import inputs

    main = workload(tmp_path)
    block = {"script": str(main), "needs_server": False, "time": 1}
    [cell] = plan_from_dict({"name": "s", "workload": {"sysbench": block}}).cells
    run = tmp_path / "run"
    kept = inputs.keep_inputs([cell], run)
    [(name, saved)] = kept.items()
    assert (
        saved["files"] == ["lib.lua", "main.lua"] and (run / "inputs" / name / "lib.lua").is_file()
    )
    inputs.check_copies([cell], run)  # unchanged: fine
    [trial] = inputs.at_copies(
        plan_from_dict({"name": "s", "workload": {"sysbench": block}}).trials, run
    )
    assert trial.cell.scenario.workload.sysbench.script == str(run / "inputs" / name / "main.lua")
    (main.parent / "lib.lua").write_text("-- changed\n")
    [changed] = plan_from_dict({"name": "s", "workload": {"sysbench": block}}).cells
    with pytest.raises(ConfigError, match="changed since the run started"):
        inputs.check_copies([changed], run)
