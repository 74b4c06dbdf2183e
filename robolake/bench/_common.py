"""Helpers shared by the benchmark scripts: timing, tables, JSON output."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def print_table(title: str, rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 20))
    for k, v in rows:
        text = f"{v:,.3f}" if isinstance(v, float) else str(v)
        print(f"{k:<{width}}  {text:>16}")


def write_json(path: str, payload: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
    print(f"\nwrote {path}")
