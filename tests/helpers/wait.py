"""Waiting for something a child process does, without a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float, child: Any = None) -> T:
    """Poll ``probe`` until it returns something; fail early if ``child`` (a Popen) exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        if child is not None and child.poll() is not None:
            pytest.fail(f"dbrig exited ({child.returncode}) before {what}")
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
