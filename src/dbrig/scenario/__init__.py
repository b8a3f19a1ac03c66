"""Scenario files: YAML in, a validated frozen :class:`Scenario` and its cells out.

- :mod:`~dbrig.scenario.model`: the schema (pydantic models);
- :mod:`~dbrig.scenario.load`: reading YAML and building a :class:`Plan`;
- :mod:`~dbrig.scenario.validate` and :mod:`~dbrig.scenario.messages`: one-line errors;
- :mod:`~dbrig.scenario.matrix`: cells, trials and their order;
- :mod:`~dbrig.scenario.shard`: ``--shard I/N``, the cells split over machines.
"""

from dbrig.factors import short_factor_names
from dbrig.scenario.load import load, plan_from_dict, read_yaml
from dbrig.scenario.matrix import (
    Cell,
    Plan,
    Shard,
    Trial,
    check_path,
    expand,
    host_values,
    matrix_blocks,
    order_trials,
)
from dbrig.scenario.messages import describe_error
from dbrig.scenario.model import (
    DEFAULT_SERVER,
    RESERVED_SERVER_SETTINGS,
    ExternalServer,
    Interference,
    ManagedServer,
    Sampling,
    Scenario,
    ServerSpec,
    Soak,
    WorkloadBlock,
)
from dbrig.scenario.overrides import apply_overrides, parse_override
from dbrig.scenario.shard import parse_shard, shard_plan, split_cells
from dbrig.scenario.validate import validate

__all__ = [
    "DEFAULT_SERVER",
    "RESERVED_SERVER_SETTINGS",
    "Cell",
    "ExternalServer",
    "Interference",
    "ManagedServer",
    "Plan",
    "Sampling",
    "Scenario",
    "ServerSpec",
    "Shard",
    "Soak",
    "Trial",
    "WorkloadBlock",
    "apply_overrides",
    "check_path",
    "describe_error",
    "expand",
    "host_values",
    "load",
    "matrix_blocks",
    "order_trials",
    "parse_override",
    "parse_shard",
    "plan_from_dict",
    "read_yaml",
    "shard_plan",
    "short_factor_names",
    "split_cells",
    "validate",
]
