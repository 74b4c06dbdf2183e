"""Package attributes resolved on first use: `robolake` and `robolake.rl` name their public API
without importing torch, lance or Ray until a name that needs them is touched (PEP 562)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`: each name in `exports` is imported from its module
    the first time it is asked for, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # resolve once
        return value

    def __dir__() -> list[str]:
        return sorted({*exports, *getattr(sys.modules[package], "__all__", ())})

    return __getattr__, __dir__
