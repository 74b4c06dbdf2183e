"""[30] The viewer's lake page over a damaged older version manifest or an unreadable tag set: the
lake is shown, the damage named in `damaged` (found by `robolake bench faults`; it answered 503)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from robolake.lake import Lake
from robolake.view.catalog import LakeCatalog


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "lake"
    shutil.copytree(src, dst)
    return dst


def test_a_damaged_older_version_is_named_not_fatal(view_lakes, tmp_path: Path) -> None:
    lake = _copy(view_lakes.jpeg, tmp_path)
    (lake / "_robolake" / "versions" / "00000001.json").write_bytes(b"")
    overview = LakeCatalog(Lake.open(str(lake))).overview()
    assert [v["version"] for v in overview["versions"]] == [2, 3]
    assert len(overview["damaged"]) == 1 and overview["damaged"][0].startswith("version 1:")


def test_a_tag_file_past_the_size_cap_is_named_not_fatal(view_lakes, tmp_path: Path) -> None:
    lake = _copy(view_lakes.jpeg, tmp_path)
    tag = next((lake / "_robolake" / "tags").glob("*.json"))
    os.truncate(tag, 5 * 2**30)  # sparse: refused by its size before a byte is read
    overview = LakeCatalog(Lake.open(str(lake))).overview()
    assert overview["tags"] == [] and overview["damaged"][0].startswith("tags:")
    assert overview["counts"]["episodes"] >= 1
