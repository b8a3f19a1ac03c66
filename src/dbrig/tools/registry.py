"""One face for every workload tool, so the runner does not care which one runs.

Each adapter turns a tool's pure driver (``tools/<tool>.py``) into what the
runner needs: which database to create, what ``prepare`` writes (so cells that
share data share one snapshot), the argv of prepare and run, how long a run
should take, and the outcome of a finished run as flat metrics plus an optional
per-interval frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
from pydantic import BaseModel

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.tools import mysqlslap, sysbench
from dbrig.tools.base import ToolInfo

if TYPE_CHECKING:
    from dbrig.endpoint import Credentials


@dataclass(frozen=True)
class Outcome:
    """What one run of a workload measured."""

    metrics: dict[str, float]
    intervals: pd.DataFrame | None  # t_s on the tool's own clock (seconds since it started)
    reason: str | None  # None when the run succeeded
    extra_tables: dict[str, pd.DataFrame]


class Workload(Protocol):
    info: ToolInfo
    params: BaseModel

    @property
    def database(self) -> str: ...

    def prepare_key(self) -> tuple: ...

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None: ...

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None: ...

    def client_options(self, credentials: Credentials) -> str | None: ...

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]: ...

    def expected_seconds(self, warmup: int) -> float | None: ...

    def analyse(self, output: str, returncode: int) -> Outcome: ...


@dataclass(frozen=True)
class SysbenchWorkload:
    params: sysbench.SysbenchParams
    info: ToolInfo = sysbench.INFO

    @property
    def database(self) -> str:
        return self.params.db

    def prepare_key(self) -> tuple:
        return ("sysbench", *sysbench.prepare_key(self.params))

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> list[str]:
        return sysbench.build_command(self.params, endpoint, "prepare", binary=str(binary))

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> list[str]:
        return sysbench.build_command(self.params, endpoint, "cleanup", binary=str(binary))

    def client_options(self, credentials: Credentials) -> str | None:
        return sysbench.client_options_text(credentials.password) if credentials.password else None

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        return sysbench.build_command(
            self.params, endpoint, "run", binary=str(binary), warmup=warmup
        )

    def expected_seconds(self, warmup: int) -> float | None:
        return float(self.params.time + warmup) if self.params.time else None

    def analyse(self, output: str, returncode: int) -> Outcome:
        result = sysbench.parse(output)
        reason = sysbench.failure_reason(result, returncode)
        metrics = dict(result.summary)
        if result.percentile is not None:
            metrics["percentile"] = float(result.percentile)
        for per_s in ("ignored_errors_per_s", "reconnects_per_s"):
            if per_s in metrics:
                short = "errors_per_s" if per_s.startswith("ignored") else per_s
                metrics[short] = metrics[per_s]
        intervals = sysbench.intervals_frame(result)
        extra = {}
        if result.histogram:
            extra["histogram"] = pd.DataFrame(result.histogram, columns=["value_ms", "count"])
        return Outcome(metrics, intervals if not intervals.empty else None, reason, extra)


@dataclass(frozen=True)
class MysqlslapWorkload:
    params: mysqlslap.MysqlslapParams
    info: ToolInfo = mysqlslap.INFO

    @property
    def database(self) -> str:
        return self.params.create_schema

    def prepare_key(self) -> tuple:
        return ("mysqlslap",)  # it creates and drops its own schema every iteration

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> None:
        return None

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> None:
        return None

    def client_options(self, credentials: Credentials) -> str | None:
        if not credentials.password:
            return None
        return mysqlslap.client_options_text(
            credentials.user,
            credentials.password,
            host=credentials.host,
            port=credentials.port,
            socket=credentials.socket,
        )

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        if warmup:
            raise ConfigError(
                "warmup: mysqlslap runs a fixed number of queries and has no warm-up phase; "
                "set warmup: 0 (its --iterations already repeat the work)"
            )
        return mysqlslap.build_command(self.params, endpoint, binary=str(binary), csv=False)

    def expected_seconds(self, warmup: int) -> float | None:
        return None

    def analyse(self, output: str, returncode: int) -> Outcome:
        load_type = mysqlslap.effective_load_type(self.params)
        result = mysqlslap.parse(output, load_type=load_type)
        reason = mysqlslap.failure_reason(result, returncode, "")
        rows = mysqlslap.rows_frame(result)
        metrics: dict[str, float] = {}
        if len(result.rows) == 1:
            row = result.rows[0]
            metrics = {
                k: float(v)
                for k, v in vars(row).items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
        return Outcome(metrics, None, reason, {"slap_rows": rows} if not rows.empty else {})


def workload_for(block: Any) -> Workload:
    """The adapter for a scenario's ``workload`` block."""
    if block.tool == "sysbench":
        return SysbenchWorkload(block.sysbench)
    if block.tool == "mysqlslap":
        return MysqlslapWorkload(block.mysqlslap)
    raise ConfigError(f"workload: no driver for '{block.tool}'")
