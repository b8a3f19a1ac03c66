"""A sysbench Lua workload written by someone else: a folder of files, not one file.

Pure, like every tool module: reading the script's files is validation (as reading the
YAML is); running sysbench to list its commands is the run side's (``run/script_probe.py``),
which takes the argv and stdin from here and hands the output back to :func:`parse_probe`.

How sysbench 1.0.20 finds a ``require``d module (``sb_lua_set_paths`` in ``sb_lua.c``):
``package.path`` is ``./?.lua;./?/init.lua;./src/lua/?.lua;`` (relative to its working
folder, not the script's), then ``~/.luarocks/...``, ``/usr/local/share/lua/5.1``,
``/usr/share/lua/5.1`` and ``/usr/share/sysbench``; ``LUA_PATH`` replaces it, ``;;``
standing for that default. So dbrig runs the run's copy of the folder with
``LUA_PATH=<copy>/?.lua;<copy>/?/init.lua;;`` (through ``env``, in the argv: what ran is
what trial.json shows): the copy's files come first, whatever the working folder holds.

sysbench cannot print the commands a script defines (``help`` prints its options,
``Unknown command: x`` names nothing), so the probe asks sysbench's own Lua state: it
runs a small chunk of Lua on sysbench's stdin (``sysbench`` with no script reads one
there and only loads it) that loads the script as sysbench would, with the command set
to ``help``, and prints the globals ``prepare``/``cleanup`` (sysbench's built-in
commands) and the keys of ``sysbench.cmdline.commands`` (its custom ones, such as
``check``). Loading runs only the scripts' top level: no thread starts, nothing connects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# A script's folder is copied whole into the run: refuse what is clearly not a workload.
MAX_FILES = 200
MAX_BYTES = 20 * 2**20
SCRIPT_COMMANDS = ("prepare", "cleanup", "check")
PROBE_MARK = "dbrig-probe"
SEARCH_PATH_VAR = "LUA_PATH"


@dataclass(frozen=True)
class ScriptFiles:
    """A Lua workload's files: the folder ``root``, its ``main`` script and every file
    kept with it (paths relative to ``root``, sorted), and their digest."""

    root: Path
    main: str
    files: tuple[str, ...]
    digest: str  # sha256 over each file's relative path and content

    @property
    def name(self) -> str:
        """The copy's folder name in the run: the digest's start and the folder's name."""
        return f"{self.digest[:12]}-{self.root.name or 'script'}"

    def main_at(self, root: Path) -> Path:
        return root / self.main


def read_script_files(script: Path, files: Sequence[str] | None = None) -> ScriptFiles:
    """The files of the workload whose main script is ``script``: those ``files`` names
    (relative to its folder), else every ``*.lua`` under its folder. Raises ValueError
    with a one-line reason (the scenario validator names the key)."""
    root = script.parent.resolve()
    main = script.resolve().relative_to(root).as_posix()
    chosen = _listed(root, files) if files is not None else _every_lua_file(root)
    names = tuple(sorted({main, *chosen}))
    if len(names) > MAX_FILES:
        raise ValueError(
            f"{root} holds {len(names)} .lua files (more than {MAX_FILES}): "
            "list the workload's own in files:"
        )
    digest = hashlib.sha256()
    size = 0
    for name in names:
        data = (root / name).read_bytes()
        size += len(data)
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    if size > MAX_BYTES:
        raise ValueError(
            f"the script's files in {root} hold {size / 2**20:.0f} MiB (more than "
            f"{MAX_BYTES / 2**20:.0f}): list the workload's own in files:"
        )
    return ScriptFiles(root, main, names, digest.hexdigest())


def _every_lua_file(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*.lua"):
        relative = path.relative_to(root)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            found.append(relative.as_posix())
    return found


def _listed(root: Path, files: Sequence[str]) -> list[str]:
    listed = []
    for name in files:
        path = (root / name).resolve()
        if not path.is_relative_to(root):
            raise ValueError(f"files: {name} is outside the script's folder {root}")
        if not path.is_file():
            raise ValueError(f"files: no such file {root / name}")
        listed.append(path.relative_to(root).as_posix())
    return listed


def lua_path(root: Path) -> str:
    """``LUA_PATH`` for a copy at ``root``: its modules first, then sysbench's own path."""
    return f"{root}/?.lua;{root}/?/init.lua;;"


def env_prefix(root: Path, chdir: Path | None = None) -> list[str]:
    """``env [-C DIR] LUA_PATH=...``: the argv's start that gives sysbench the search path."""
    change = ["-C", str(chdir)] if chdir is not None else []
    return ["env", *change, f"{SEARCH_PATH_VAR}={lua_path(root)}"]


def probe_source(main: Path) -> str:
    """The Lua chunk, given on sysbench's stdin, that lists what ``main`` defines."""
    quoted = _lua_string(str(main))
    return f"""\
sysbench.cmdline.command = "help"
local ok, err = pcall(dofile, {quoted})
if not ok then
  io.write("{PROBE_MARK} error ", (tostring(err):gsub("\\n", "\\1")), "\\n")
  return
end
for _, name in ipairs({{"prepare", "cleanup"}}) do
  if type(rawget(_G, name)) == "function" then
    io.write("{PROBE_MARK} command ", name, "\\n")
  end
end
if type(sysbench.cmdline.commands) == "table" then
  for name, _ in pairs(sysbench.cmdline.commands) do
    io.write("{PROBE_MARK} command ", tostring(name), "\\n")
  end
end
io.write("{PROBE_MARK} done\\n")
"""


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def probe_argv(binary: str, root: Path, empty: Path) -> list[str]:
    """sysbench reading the probe from stdin, with the copy's search path, in an empty
    folder (``./?.lua`` then finds nothing the run would not)."""
    return [*env_prefix(root, chdir=empty), binary]


@dataclass(frozen=True)
class ProbeResult:
    commands: frozenset[str]  # of SCRIPT_COMMANDS, the ones the script defines
    error: str | None  # the script failed to load: a one-line reason


def parse_probe(text: str, files: ScriptFiles, copy: Path) -> ProbeResult:
    """What the probe printed: the commands found, or why the script did not load (a
    ``require`` that failed names the module, where sysbench looked, and ``files:``)."""
    found: set[str] = set()
    done = False
    for line in text.splitlines():
        if not line.startswith(PROBE_MARK + " "):
            continue
        kind, _, rest = line[len(PROBE_MARK) + 1 :].partition(" ")
        if kind == "error":
            message = rest.replace("\1", "\n").replace(str(copy), str(files.root))
            return ProbeResult(frozenset(), load_error(message, files))
        if kind == "command" and rest in SCRIPT_COMMANDS:
            found.add(rest)
        done |= kind == "done"
    if not done:
        last = text.strip().splitlines()[-1:] or ["no output"]
        return ProbeResult(frozenset(), f"sysbench could not load it: {last[0]}")
    return ProbeResult(frozenset(found), None)


# "tpcc.lua:21: module 'tpcc_common' not found:\n\tno field ...\n\tno file './x.lua'"
MISSING_MODULE_RE = re.compile(r"^(?P<where>\S+:\d+): module '(?P<module>[^']+)' not found")
NO_FILE_RE = re.compile(r"no file '([^']+\.lua)'")


def load_error(message: str, files: ScriptFiles) -> str:
    """One line for a script that failed to load; a missing module is explained."""
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    match = MISSING_MODULE_RE.match(first)
    if match is None:
        return first
    module, where = match["module"], Path(match["where"]).name
    looked = NO_FILE_RE.findall(message)[:3]
    tried = f" (looked in {', '.join(looked)}, ...)" if looked else ""
    wanted = module.replace(".", "/") + ".lua"
    return (
        f"{where}: module '{module}' not found{tried}: put {wanted} in {files.root} "
        f"and list it in files: (or leave files: out to take every .lua file there)"
    )


def missing_module(output: str, files: ScriptFiles) -> str | None:
    """A sysbench run's ``FATAL: ... module 'x' not found`` as :func:`load_error`'s line."""
    for index, line in enumerate(lines := output.splitlines()):
        text = line.removeprefix("FATAL: ").strip()
        if MISSING_MODULE_RE.match(text):
            return load_error("\n".join([text, *lines[index + 1 :]]), files)
    return None
