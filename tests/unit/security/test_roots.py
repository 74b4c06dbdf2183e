"""[30] Roots everywhere: a pack output, an export or a lake handed over cannot make robolake read or
write outside it, whatever its links say (`storage.ensure_within` / `under_root` at every site)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from robolake.loaders import open_shards
from robolake.storage import OutsideRootError, check_name, ensure_within, under_root


def test_names_from_data_are_names(tmp_path: Path) -> None:
    for bad in ("../x", "a/b", "..", "", "x\x00y", "/etc/passwd"):
        with pytest.raises(OutsideRootError):
            check_name(bad, "table")
    assert under_root(tmp_path, "ok", "fine") == str(tmp_path / "ok" / "fine")
    (tmp_path / "inside").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "inside")  # a link that stays inside is fine
    assert ensure_within(tmp_path, tmp_path / "link" / "f")


def test_a_pack_whose_shards_are_linked_outside_is_refused(packed_data, tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(packed_data.packed, pack)
    outside = tmp_path / "outside.lance"
    shutil.move(str(pack / "shards.lance"), outside)
    (pack / "shards.lance").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideRootError, match="leads outside"):
        open_shards(str(pack))


def test_pack_never_writes_through_a_linked_shards_folder(packed_data, tmp_path: Path) -> None:
    from robolake.lake import Lake
    from robolake.packers import PackSpec
    from robolake.packers.pipeline import pack

    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "shards.lance").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OutsideRootError):
        pack(Lake.open(str(packed_data.lake)), PackSpec(max_tokens=2048), str(out))
    assert not any(elsewhere.iterdir())
