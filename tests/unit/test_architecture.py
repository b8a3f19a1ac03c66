"""The folders' import rules (docs/architecture.md), checked on the source with ``ast``.

Each part of ``src/dbrig`` may import only the parts listed for it. The rules the
design depends on are the ones named in the docs: tools never start processes,
report never imports run or server, analysis never imports report or scenario,
store never imports run or server, scenario never imports run, and the server
never imports the tools (it restores and starts by key; the run side prepares).

And the tool seam: no tool is named (its YAML key or a binary of its ``INFO``, taken
from the registry) in a string outside ``tools/`` and the registries, and no declared
member of the seam is read with ``getattr`` as if it were hidden.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "dbrig"

LEAVES = {"errors", "endpoint", "factors", "ownership", "metrics", "util"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "endpoint": {"errors"},
    "factors": {"errors"},
    "ownership": {"errors", "util"},
    "metrics": {"errors"},
    "util": {"errors"},
    "proc": {"errors", "util"},
    "tools": {"errors", "endpoint", "metrics", "util"},
    "sampling": {"errors", "metrics", "util"},
    "host": {"errors", "proc", "util"},
    "scenario": {"errors", "factors", "host", "tools", "util"},
    "server": {"errors", "endpoint", "ownership", "proc", "host", "scenario", "util"},
    "remote": {
        "errors",
        "endpoint",
        "ownership",
        "proc",
        "host",
        "sampling",
        "scenario",
        "server",
        "util",
    },
    "store": {"errors", "ownership", "factors", "metrics", "util"},
    "analysis": {"errors", "factors", "metrics", "util"},
    "report": {"errors", "store", "analysis", "factors", "metrics", "tools", "util"},
    "run": LEAVES
    | {"proc", "host", "sampling", "scenario", "server", "remote", "store", "tools", "analysis"},
    "commands": LEAVES
    | {"proc", "host", "sampling", "scenario", "server", "remote", "store", "tools", "analysis"}
    | {"report", "run"},
    "cli": {"errors", "proc", "commands"},
}
# Only proc.py starts processes; nothing else may even import the means to.
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty"}


def _part(path: Path) -> str:
    """The part of dbrig a file belongs to: its folder, or its module name at the top."""
    relative = path.relative_to(SRC).with_suffix("")
    return relative.parts[0]


def _dbrig_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, part of dbrig) for every import of dbrig in ``tree``, nested ones too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dbrig":
                found += [(node.lineno, alias.name) for alias in node.names]
            elif node.module.startswith("dbrig."):
                found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dbrig."):
                    found.append((node.lineno, alias.name.split(".")[1]))
    return found


def _plain_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent != SRC)


def test_every_part_of_dbrig_has_rules() -> None:
    parts = {_part(p) for p in _sources()}
    assert parts <= set(ALLOWED), f"parts without import rules: {sorted(parts - set(ALLOWED))}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_follow_the_data_path(path: Path) -> None:
    part = _part(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    allowed = ALLOWED[part] | {part, "__version__"}
    wrong = [
        f"{path.relative_to(SRC)}:{n}: {part} may not import dbrig.{other}"
        for n, other in _dbrig_imports(tree)
        if other not in allowed
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_only_proc_starts_processes(path: Path) -> None:
    if _part(path) == "proc":
        return
    tree = ast.parse(path.read_text(), filename=str(path))
    wrong = [
        f"{path.relative_to(SRC)}:{n}: imports {name}; start processes through dbrig.proc"
        for n, name in _plain_imports(tree)
        if name in PROCESS_MODULES
    ]
    assert not wrong, "\n".join(wrong)


def test_the_rules_catch_a_forbidden_import() -> None:
    tree = ast.parse("from dbrig.run.runner import Runner\nfrom dbrig import proc\n")
    assert [other for _, other in _dbrig_imports(tree)] == ["run", "proc"]
    assert "run" not in ALLOWED["report"] and "server" not in ALLOWED["report"]
    assert "proc" not in ALLOWED["tools"] and "run" not in ALLOWED["scenario"]
    assert not {"report", "scenario"} & ALLOWED["analysis"]
    assert not {"run", "server"} & ALLOWED["store"]
    assert "tools" not in ALLOWED["server"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the dbrig modules it imports (type-only imports too: a knot is a knot)."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # "from dbrig.store import model" imports a module; "... import RunDir" does not
                subs = [f"{node.module}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in modules] or [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def test_no_two_modules_import_each_other_even_indirectly() -> None:
    graph = _import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


# --------------------------------------------------------------------------- tool names

# Where a tool may be named: its own module and the two registries (tools/registry.py,
# metrics.py, whose producers are tool keys). Everything else asks the tool.
TOOL_HOMES = ("tools/", "metrics.py")

# Files still naming a tool that another change is rewriting, as "path:line": each entry
# is removed when that change lands (none today).
TOOL_NAME_ALLOWLIST: set[str] = set()

# getattr on the tool seam that the split of run/trial.py changes to plain attribute
# reads (``self.workload.start_line``, ``self.workload.interval_s``): remove at merge.
SEAM_GETATTR_ALLOWLIST: set[str] = set()


def _tool_words() -> set[str]:
    """Every tool's YAML key (and its Python field name) and the names of its binaries."""
    from dbrig.tools.registry import INTERFERENCE_TOOLS, WORKLOAD_TOOLS, field_name

    words: set[str] = set()
    for key, tool in (*WORKLOAD_TOOLS.items(), *INTERFERENCE_TOOLS.items()):
        words |= {key, field_name(key), tool.info.name, *tool.info.binaries}
    return words


def _tool_word_pattern(words: set[str]) -> re.Pattern[str]:
    """A tool's name as a word of its own: ``workload.sysbench.tables`` and "stress-ng
    achieved" name one; a longer identifier that contains one (the metric ``tpcc_retries``,
    ``stress_achieved_ratio``) does not."""
    names = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])({names})(?![\w-])")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes: prose may name a tool as an example."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _tool_names_in(path: Path, pattern: re.Pattern[str]) -> list[str]:
    """``path:line: 'literal'`` for each string literal (f-string parts too) naming a tool."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    relative = path.relative_to(SRC).as_posix()
    return [
        f"{relative}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and pattern.search(node.value)
    ]


def _outside_the_tools() -> list[Path]:
    return [p for p in _sources() if not p.relative_to(SRC).as_posix().startswith(TOOL_HOMES)]


def test_no_tool_is_named_outside_the_tools_and_the_registries() -> None:
    pattern = _tool_word_pattern(_tool_words())
    found = [hit for path in _outside_the_tools() for hit in _tool_names_in(path, pattern)]
    wrong = [hit for hit in found if hit.split(": ", 1)[0] not in TOOL_NAME_ALLOWLIST]
    stale = TOOL_NAME_ALLOWLIST - {hit.split(": ", 1)[0] for hit in found}
    assert not stale, f"fixed: remove from TOOL_NAME_ALLOWLIST: {sorted(stale)}"
    assert not wrong, (
        "a tool named outside tools/ and the registries; ask the tool instead (a member "
        "of the WorkloadTool / InterferenceTool protocols in tools/base.py):\n" + "\n".join(wrong)
    )


def test_the_tool_names_come_from_the_registry_and_match_as_words() -> None:
    words = _tool_words()
    assert {"sysbench", "mysqlslap", "mariadb-slap", "tpcc", "acked_writes"} <= words
    assert {"stress-ng", "stress_ng"} <= words
    pattern = _tool_word_pattern(words)
    for named in ("workload.sysbench.tables", "stress-ng achieved only", "run mariadb-slap"):
        assert pattern.search(named), named
    for unnamed in ("tpcc_retries", "stress_achieved_ratio", "sysbench_x", "my-tpcc", "stress"):
        assert not pattern.search(unnamed), unnamed


def _seam_members() -> set[str]:
    """The names the tool seam declares: what a caller reads as plain attributes."""
    from dbrig.tools import base

    protocols = (
        base.WorkloadTool,
        base.InterferenceTool,
        base.CheckedWorkload,
        base.ClientLogWorkload,
        base.ResumableWorkload,
        base.SizedDataSet,
    )
    names = {n for p in protocols for n in (*vars(p), *p.__annotations__)}
    return {n for n in names if not n.startswith("_")} | {"cpus", "host"}


def _seam_getattrs(path: Path, members: set[str]) -> list[str]:
    """getattr(<a tool or workload>, "<seam member>"): a member read as if it were hidden."""
    tree = ast.parse(path.read_text(), filename=str(path))
    relative = path.relative_to(SRC).as_posix()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id != "getattr" or len(node.args) < 2:
            continue
        target, name = ast.unparse(node.args[0]), node.args[1]
        if not (isinstance(name, ast.Constant) and name.value in members):
            continue
        if re.search(r"tool|workload", target):
            found.append(f"{relative}: getattr({target}, {name.value!r})")
    return found


def test_the_tool_seam_is_read_without_getattr() -> None:
    members = _seam_members()
    assert {"start_line", "interval_s", "reconnects_itself", "client_host", "host"} <= members
    found = [hit for path in _outside_the_tools() for hit in _seam_getattrs(path, members)]
    wrong = [hit for hit in found if hit not in SEAM_GETATTR_ALLOWLIST]
    assert not wrong, (
        "a declared member of the tool seam read with getattr; read it as an attribute:\n"
        + "\n".join(wrong)
    )
    stale = SEAM_GETATTR_ALLOWLIST - set(found)
    assert not stale, f"fixed: remove from SEAM_GETATTR_ALLOWLIST: {sorted(stale)}"


def _names(node: ast.AST) -> list[str]:
    """The class names an isinstance's second argument names: ``A``, ``m.A``, ``A | B``,
    ``(A, B)``."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.BinOp):
        return _names(node.left) + _names(node.right)
    if isinstance(node, ast.Tuple):
        return [name for element in node.elts for name in _names(element)]
    return []


def _handle_type_checks(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, class) for every isinstance whose second argument names a ``*Handle`` class."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            found += [(node.lineno, n) for n in _names(node.args[1]) if n.endswith("Handle")]
    return found


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_isinstance_on_server_handles(path: Path) -> None:
    """A server handle declares what it can do (server/protocol.py: ``capabilities`` and
    the ``Handle`` members); the run side reads that, never the handle's class."""
    tree = ast.parse(path.read_text(), filename=str(path))
    wrong = [
        f"{path.relative_to(SRC)}:{n}: isinstance(..., {name}): read the handle's capabilities"
        for n, name in _handle_type_checks(tree)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_handle_check_catches_each_spelling() -> None:
    source = (
        "isinstance(s, WorkDirHandle)\n"
        "isinstance(s, ExternalServerHandle | RemoteServerHandle)\n"
        "isinstance(s, (handles.ManagedServerHandle, int))\n"
        "isinstance(h, logging.StreamHandler)\n"
    )
    found = _handle_type_checks(ast.parse(source))
    assert found == [
        (1, "WorkDirHandle"),
        (2, "ExternalServerHandle"),
        (2, "RemoteServerHandle"),
        (3, "ManagedServerHandle"),
    ]
