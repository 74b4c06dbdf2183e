"""The format registry and discovery: whole-tree walk, unrecognised data reported, no lake on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from robolake.lake.intake.ingest import ingest
from robolake.lake.sources import discover_readers, format_choices, formats, get_format
from robolake.writers.synthetic import EMBODIMENT_NAMES, SyntheticConfig, generate_synthetic


def test_lerobot_is_registered_first_and_aliases_resolve():
    # LeRobot's Lance layout first: its folders hold meta/info.json too, which the lerobot reader claims
    assert [f.name for f in formats()[:2]] == ["lerobot-lance", "lerobot"]
    assert get_format("synthetic").name == "lerobot"
    assert "auto" in format_choices() and "lerobot" in format_choices()
    with pytest.raises(ValueError, match="unknown source format 'nope'"):
        get_format("nope")


def test_discovery_walks_the_whole_tree(tmp_path: Path):
    deep = tmp_path / "robots" / "by_task" / "pick" / "day1"
    generate_synthetic(
        str(deep),
        SyntheticConfig(
            episodes_per_embodiment=1, min_length=8, max_length=10, image_size=16, embodiments=EMBODIMENT_NAMES[:1]
        ),
    )
    (tmp_path / "robots" / "notes.txt").write_text("hello")
    (tmp_path / "robots" / "stray.npz").write_bytes(b"not really")
    found = discover_readers(str(tmp_path))
    assert len(found) == 1
    assert found[0].root.startswith(str(deep))
    assert [u for u in found.unrecognised if "stray.npz" in u], found.unrecognised
    assert not [u for u in found.unrecognised if "notes.txt" in u]


@pytest.mark.parametrize("kind", ["missing", "empty", "junk"])
def test_nothing_readable_leaves_no_lake(tmp_path: Path, kind: str):
    src = tmp_path / "src"
    if kind != "missing":
        src.mkdir()
    if kind == "junk":
        (src / "a.bin").write_bytes(b"\0" * 10)
        (src / "b.txt").write_text("x")
    lake = tmp_path / "lake"
    with pytest.raises(ValueError, match="no dataset found|does not exist") as info:
        ingest(str(src), str(lake))
    assert "\n" not in str(info.value)
    if kind != "missing":
        assert "readable formats: lerobot" in str(info.value)
    if kind == "junk":
        assert "1 .bin" in str(info.value)
    assert not os.path.exists(lake)


def test_one_tag_one_width(tmp_path: Path):
    """Discovery opens both; ingest gives the tag the first one's width (it passed its own checks)
    and quarantines the other's episodes (tests/unit/lake/test_width_checks.py has the rest)."""
    from robolake.lake.sources import SourceOptions
    from robolake.testing.hdf5 import write_robosuite

    (tmp_path / "src").mkdir()
    write_robosuite(tmp_path / "src" / "a.hdf5", state_dim=32)
    write_robosuite(tmp_path / "src" / "b.hdf5", state_dim=40)  # same robot and env, another scene version
    found = discover_readers(str(tmp_path / "src"))
    assert [Path(r.root).name for r in found] == ["a.hdf5", "b.hdf5"] and not found.failed
    result = ingest(str(tmp_path / "src"), str(tmp_path / "lake"))
    assert result.quarantined == result.ingested > 0
    assert all(
        path.endswith("b.hdf5") and "32/7 but this dataset has 40/7" in reason and "--embodiment" in reason
        for path, reason in result.quarantine
    ), result.quarantine
    forced = discover_readers(str(tmp_path / "src" / "b.hdf5"), options=SourceOptions(embodiment="suite_v2"))
    assert forced[0].tag == "suite_v2"
