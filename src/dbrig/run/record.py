"""What one trial recorded: its status and reason, metrics, timings, commands, settings in
force and warnings, as the runner saves it (trial.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbrig import proc, store
from dbrig.scenario import Trial


@dataclass
class TrialRecord:
    trial: Trial
    status: str = "ok"
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)  # role -> argv
    effective_config: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)
    started_at: str = ""

    def fail(self, reason: str) -> None:
        if self.status == "ok":
            self.status, self.reason = "failed", reason

    def to_result(self, short_names: dict[str, str]) -> store.TrialResult:
        """What trial.json saves (passwords in the commands masked)."""
        cell = self.trial.cell
        return store.TrialResult(
            trial=self.trial.id,
            cell=cell.id,
            repetition=self.trial.repetition,
            server=cell.server,
            label=cell.label(short_names),
            factors=dict(cell.factor_dict),
            status=self.status,
            reason=self.reason,
            started_at=self.started_at,
            timings=dict(self.timings),
            metrics=dict(self.metrics),
            effective_config=dict(self.effective_config),
            system=dict(self.system),
            warnings=tuple(self.warnings),
            output_tail=tuple(self.output_tail),
            commands={role: tuple(proc.redact(argv)) for role, argv in self.commands.items()},
        )
