"""Benchmarks, one module per measured claim; `robolake bench NAME` runs `robolake.bench.NAME.main`.

Each writes JSON (`--json PATH`) and prints a table. Ratios are measured within one run against a
baseline on the same data; see each module's docstring for what it compares.
"""

from __future__ import annotations

import pkgutil

__all__ = ["available"]


def available() -> list[str]:
    """Names of the benchmark modules (`robolake bench NAME`)."""
    import robolake.bench as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
