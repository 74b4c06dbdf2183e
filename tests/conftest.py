"""Test configuration: the shared fixtures live in the `tests.fixtures` plugin."""

from typing import Any

pytest_plugins = ["tests.fixtures"]


def __getattr__(name: str) -> Any:
    # `from tests.conftest import copy_pick_n_place` keeps working; new code imports tests.fixtures.
    import tests.fixtures

    return getattr(tests.fixtures, name)
