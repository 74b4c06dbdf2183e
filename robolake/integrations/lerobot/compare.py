"""Item-by-item comparison of the adapter's items with `LeRobotDataset`'s for the same indices.

The rule the tests and `robolake bench peers` apply (`lerobot_adapter.items_equal`): the same
keys; the same dtype and shape for every tensor; state, action, timestamps, the index columns and
the `*_is_pad` masks exactly equal; the same task string; camera frames bit-exact when both
sides decode the same bitstream (an export that copied the recorded packets), else within
`max_abs_pixel` (a value in [0, 1]: 1/255 is one level) where one side decodes a re-encode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ItemsReport", "compare_items", "saved_items"]


@dataclass(frozen=True)
class ItemsReport:
    """What `compare_items` found.

    Attributes:
        items: Items compared.
        equal: Every rule held for every item.
        frames_bit_exact: Every camera tensor equal bit for bit.
        max_abs_pixel: Largest |difference| of a camera value (0 when bit-exact).
        mismatches: One line per difference (the first 20).
    """

    items: int
    equal: bool
    frames_bit_exact: bool
    max_abs_pixel: float
    mismatches: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "equal": self.equal,
            "frames_bit_exact": self.frames_bit_exact,
            "max_abs_pixel": self.max_abs_pixel,
            "mismatches": list(self.mismatches),
        }


def compare_items(
    ours: Sequence[Mapping[str, Any]],
    theirs: Sequence[Mapping[str, Any]],
    camera_keys: Sequence[str],
    *,
    max_abs_pixel: float = 0.0,
    ignore: Sequence[str] = (),
) -> ItemsReport:
    """Compare two lists of items (tensors or numpy arrays; `task` a string).

    Args:
        ours: The adapter's items.
        theirs: LeRobot's items for the same indices, in the same order.
        camera_keys: Keys compared within `max_abs_pixel`; every other tensor exactly.
        max_abs_pixel: Tolerance on camera values (0: bit-exact required).
        ignore: Keys only LeRobot's side has that are not compared (columns an export adds,
            e.g. `next.done` and GR00T annotation columns).
    """
    bad: list[str] = []
    worst = 0.0
    exact = True
    for n, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        keys_a, keys_b = set(a), set(b) - set(ignore)
        if keys_a != keys_b:
            bad.append(
                f"item {n}: keys differ: only ours {sorted(keys_a - keys_b)}, only theirs {sorted(keys_b - keys_a)}"
            )
        for key in sorted(keys_a & keys_b):
            x, y = a[key], b[key]
            if isinstance(x, str) or isinstance(y, str):
                if x != y:
                    bad.append(f"item {n} {key}: {x!r} != {y!r}")
                continue
            x, y = _numpy(x), _numpy(y)
            if x.dtype != y.dtype or x.shape != y.shape:
                bad.append(f"item {n} {key}: {x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)}")
                continue
            if key in camera_keys:
                diff = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()) if x.size else 0.0
                if diff > 0:
                    exact = False
                worst = max(worst, diff)
                if diff > max_abs_pixel:
                    bad.append(f"item {n} {key}: max |difference| {diff:.4g} > {max_abs_pixel:.4g}")
            elif not np.array_equal(x, y):
                bad.append(f"item {n} {key}: values differ (first: {x.reshape(-1)[:3]} vs {y.reshape(-1)[:3]})")
    return ItemsReport(
        items=len(ours), equal=not bad, frames_bit_exact=exact, max_abs_pixel=worst, mismatches=tuple(bad[:20])
    )


def _numpy(x: Any) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def saved_items(npz_path: str, strings: Mapping[str, Any], indices: Sequence[int]) -> list[dict[str, Any]]:
    """Items another process saved as `INDEX/KEY` arrays in an `.npz`, with their string values
    (`task`) in `strings` under the same names (what the LeRobot peer's `items` answers)."""
    with np.load(npz_path) as z:
        arrays = {name: z[name] for name in z.files}
    out = []
    for i in indices:
        prefix = f"{i}/"
        item: dict[str, Any] = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        item.update({k[len(prefix) :]: v for k, v in strings.items() if k.startswith(prefix) and isinstance(v, str)})
        out.append(item)
    return out
