"""[30] A split is all its tags or none, under kill -9 at every phase, and its parts name one version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robolake import curate
from robolake.lake import list_tags, read_tag
from robolake.lake.protocol import faults

REPO = Path(__file__).resolve().parents[3]
SCRIPT = (
    "import sys\nfrom robolake import curate\n"
    "curate.split(sys.argv[1], curate.SplitConfig(val=0.5), replace=sys.argv[2] == '1')\n"
)


def _split_killed(uri: Path, phase: str, replace: bool) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.ENV_VAR: f"{phase}:kill"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(uri), "1" if replace else "0"], env=env, timeout=300)
    return proc.returncode


def _split_tags(uri: Path) -> dict[str, int]:
    return {t.name: t.version for t in list_tags(str(uri)) if t.name.startswith("split:")}


@pytest.mark.parametrize("phase", ["tag_set:before", "tag_set:published"])
def test_a_killed_split_leaves_all_its_tags_or_none(lake_dir: Path, phase: str) -> None:
    assert _split_killed(lake_dir, phase, replace=False) == -9
    tags = _split_tags(lake_dir)
    assert tags == {} if phase == "tag_set:before" else set(tags) == {"split:train", "split:val"}
    if not tags:  # nothing half-made: the split runs as if never tried
        curate.split(str(lake_dir), curate.SplitConfig(val=0.5))
    tags = _split_tags(lake_dir)
    assert set(tags) == {"split:train", "split:val"} and len(set(tags.values())) == 1


def test_a_killed_replace_keeps_the_old_split_or_the_new_one_whole(lake_dir: Path) -> None:
    curate.split(str(lake_dir), curate.SplitConfig(val=0.5, seed=1))
    before = {p: read_tag(str(lake_dir), f"split:{p}").episodes for p in ("train", "val")}
    curate.delete(str(lake_dir), episodes=[before["train"][0]], reason="a newer version to split")
    assert _split_killed(lake_dir, "tag_set:before", replace=True) == -9
    assert {p: read_tag(str(lake_dir), f"split:{p}").episodes for p in ("train", "val")} == before
    curate.split(str(lake_dir), curate.SplitConfig(val=0.5), replace=True)
    tags = _split_tags(lake_dir)
    assert len(set(tags.values())) == 1  # both parts name the same (new) version


def test_tags_written_by_an_older_robolake_are_read_and_shadowed(lake_dir: Path) -> None:
    from robolake.lake import Lake, create_tag

    lake = Lake.open(str(lake_dir))
    ids = sorted(lake.episode_ids())
    create_tag(str(lake_dir), "split:train", lake.version, episodes=ids[1:])  # the old layout: one file a part
    create_tag(str(lake_dir), "split:val", lake.version, episodes=ids[:1])
    assert read_tag(str(lake_dir), "split:val").episodes == tuple(ids[:1])
    with pytest.raises(curate.TagExistsError if hasattr(curate, "TagExistsError") else FileExistsError):
        curate.split(str(lake_dir), curate.SplitConfig(val=0.5))
    curate.split(str(lake_dir), curate.SplitConfig(val=0.5), replace=True)
    files = sorted(p.name for p in (lake_dir / "_robolake" / "tags").iterdir())
    assert files == ["split.tagset.json"], files
    doc = json.loads((lake_dir / "_robolake" / "tags" / "split.tagset.json").read_text())
    assert {t["name"] for t in doc["tags"]} == {"split:train", "split:val"}
    assert Lake.open(str(lake_dir), tag="split:val").episode_ids()
