"""The notebooks in notebooks/ run top to bottom with a real Jupyter kernel and show what they claim.

`NotebookClient.execute` raises `CellExecutionError` on the first cell that fails, so running is
checked by the execution itself. What is checked here is what each notebook prints: the numbers
it puts in front of a reader (packing beats padding, training losses are finite, every packed
sample reaches a Ray split).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def _text(nb: Any) -> str:
    """Everything the code cells printed or showed as text, in order."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "text/plain" in out.get("data", {}):
                parts.append(out["data"]["text/plain"])
    return "\n".join(parts)


def _images(nb: Any) -> int:
    return sum(
        "image/png" in out.get("data", {})
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


def _find(pattern: str, text: str) -> re.Match[str]:
    match = re.search(pattern, text)
    assert match is not None, f"the notebook printed nothing matching {pattern!r}; it printed:\n{text[-2000:]}"
    return match


def _check_quickstart(nb: Any) -> None:
    text = _text(nb)
    fill = _find(rf"(\d+) samples -> (\d+) sequences, fill ({NUMBER}) \(padded: ({NUMBER})\)", text)
    samples, sequences, packed, padded = int(fill[1]), int(fill[2]), float(fill[3]), float(fill[4])
    assert 0 < sequences <= samples and 0 < packed <= 1.0 and 0 < padded <= 1.0
    batch = _find(r"(\d+) samples (\d+) tokens; cu_seqlens \[([^\]]*)\]", text)
    bounds = [int(x) for x in batch[3].split(",")]
    assert int(batch[1]) > 0 and bounds[0] == 0 and bounds == sorted(bounds) and bounds[-1] <= int(batch[2])
    losses = [float(x) for x in re.findall(NUMBER, _find(r"losses: \[([^\]]*)\]", text)[1])]
    assert len(losses) == 5 and all(math.isfinite(x) for x in losses)


def _check_packing(nb: Any) -> None:
    text = _text(nb)
    fills = {name: float(v) for name, v in re.findall(rf"^(bfd|ffd|window)\s+fill=({NUMBER})", text, re.M)}
    assert set(fills) == {"bfd", "ffd", "window"}
    padded = float(_find(rf"padded\s+fill=({NUMBER})", text)[1])
    assert all(padded < f <= 1.0 for f in fills.values())
    assert _images(nb) == 2  # the length histograms and the fill-rate bars


def _check_scale_out(nb: Any) -> None:
    split = _find(r"samples per worker: \[(\d+), (\d+)\] total (\d+) of (\d+)", _text(nb))
    a, b, total, expected = (int(x) for x in split.groups())
    assert a > 0 and b > 0 and a + b == total == expected


def _check_curation(nb: Any) -> None:
    text = _text(nb)
    ingested = int(_find(r"(\d+) episodes\n", text)[1])
    deleted = _find(r"version (\d+): removed (\d+) episodes; (\d+) left", text)
    removed, left = int(deleted[2]), int(deleted[3])
    assert removed > 0 and removed + left == ingested
    assert int(_find(rf"version {int(deleted[1]) - 1} still holds (\d+) episodes", text)[1]) == ingested
    parts = _find(r"\{'train': (\d+), 'val': (\d+)\}", text)
    assert int(parts[1]) > int(parts[2]) > 0 and int(parts[1]) + int(parts[2]) == left
    losses = [float(x) for x in re.findall(NUMBER, _find(r"losses: \[([^\]]*)\]", text)[1])]
    assert len(losses) == 5 and all(math.isfinite(x) for x in losses)


def _check_lerobot_adapter(nb: Any) -> None:
    text = _text(nb)
    assert re.search(r"action\s+torch.float32 \(16, \d+\)", text)
    assert "first frame state pad: [True, False]" in text
    assert 0 < int(_find(r"last frame action pad: (\d+) of 16", text)[1]) < 16
    a, b, total, n = (int(x) for x in _find(r"streamed per rank: \[(\d+), (\d+)\] total (\d+) of (\d+)", text).groups())
    assert a > 0 and b > 0 and a + b == total == n


CHECKS: dict[str, Callable[[Any], None]] = {
    "01_quickstart": _check_quickstart,
    "02_packing": _check_packing,
    "03_scale_out": _check_scale_out,
    "04_curation": _check_curation,
    "05_lerobot_adapter": _check_lerobot_adapter,
}


def test_every_notebook_is_checked() -> None:
    missing = sorted({p.stem for p in NOTEBOOKS} - set(CHECKS))
    assert not missing, f"add a check of what {missing} print to CHECKS"


# The scale-out notebook starts a multi-node Ray cluster: the slowest (~95 s here); opt in with -m slow.
SLOW = {"03_scale_out"}


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW else []) for p in NOTEBOOKS]
)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    CHECKS[path.stem](nb)
