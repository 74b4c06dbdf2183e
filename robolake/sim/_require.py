"""Lazy import of the simulator stack (the `sim` extra), with offscreen rendering configured first.

MuJoCo picks its OpenGL backend when it is first imported, so `MUJOCO_GL` must be set before
that: EGL renders offscreen on a machine without a display (through Mesa on a CPU-only host).
A user who set `MUJOCO_GL` themselves (osmesa, glfw) keeps their choice.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

__all__ = ["require_sim", "SIM_EXTRA_HINT"]

SIM_EXTRA_HINT = "pip install 'robolake[sim]'"


def require_sim() -> tuple[ModuleType, ModuleType]:
    """(metaworld, mujoco), imported with MUJOCO_GL=egl unless already set.

    Raises:
        ImportError: the sim extra is not installed (names the pip command).
    """
    os.environ.setdefault("MUJOCO_GL", "egl")
    # Mesa renders with one thread per core by default; parallel env workers then fight over
    # the cores, and one thread each is faster in total.
    os.environ.setdefault("LP_NUM_THREADS", "1")
    # Meta-World's scripted experts warn on every episode that their gains "may be too high"
    # (the environment clips actions to [-1, 1] anyway); in every process that runs them, Ray
    # workers included, that warning would reach the user's terminal.
    warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high", category=UserWarning)
    try:
        import metaworld
        import mujoco
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"robolake.sim needs Meta-World and MuJoCo, which are not installed ({e}); run `{SIM_EXTRA_HINT}`"
        ) from e
    return metaworld, mujoco
