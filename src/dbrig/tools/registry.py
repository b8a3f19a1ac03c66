"""Every tool dbrig drives, by its YAML key: the one list a new tool is added to.

The scenario schema (``workload:`` and ``interference:`` blocks), preflight,
the dry run, the trial and ``dbrig doctor`` all read these two tables; nothing
else names a tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dbrig.errors import ConfigError
from dbrig.tools.acked_writes import AckedWritesTool
from dbrig.tools.base import InterferenceTool, ToolInfo, WorkloadTool
from dbrig.tools.mysqlslap import MysqlslapTool
from dbrig.tools.stress_ng import StressNgTool
from dbrig.tools.sysbench import SysbenchTool
from dbrig.tools.tpcc import TpccTool

WORKLOAD_TOOLS: dict[str, type[WorkloadTool]] = {
    SysbenchTool.key: SysbenchTool,
    MysqlslapTool.key: MysqlslapTool,
    TpccTool.key: TpccTool,
    AckedWritesTool.key: AckedWritesTool,
}
INTERFERENCE_TOOLS: dict[str, type[InterferenceTool]] = {
    StressNgTool.key: StressNgTool,
}


def field_name(key: str) -> str:
    """The Python attribute for a YAML key: ``stress-ng`` is ``stress_ng``."""
    return key.replace("-", "_")


def workload_for(block: Any) -> WorkloadTool:
    """The tool of a scenario's ``workload`` block (which names exactly one)."""
    for key, tool in WORKLOAD_TOOLS.items():
        params = getattr(block, field_name(key), None)
        if params is not None:
            return tool(params)
    names = ", ".join(WORKLOAD_TOOLS)
    raise ConfigError(f"workload: names no tool (expected one of: {names})")


def interference_for(block: Any) -> list[InterferenceTool]:
    """The active tools of a scenario's ``interference`` block, in registry order."""
    tools = []
    for key, tool in INTERFERENCE_TOOLS.items():
        params = getattr(block, field_name(key), None)
        if params is not None:
            instance = tool(params)
            if instance.active:
                tools.append(instance)
    return tools


def all_tools() -> Iterator[tuple[ToolInfo, bool]]:
    """Every tool's probe for ``dbrig doctor``: its info and whether it is required.

    A binary two tools share (tpcc runs on sysbench) is probed once, under its first tool.
    """
    seen: set[str] = set()
    for tool in (*WORKLOAD_TOOLS.values(), *INTERFERENCE_TOOLS.values()):
        if tool.info.name not in seen:
            seen.add(tool.info.name)
            yield tool.info, tool.required_by_doctor
