"""Media layouts: the record by default, lossy layouts opt-in and labelled, access copies derived,
fast downscaled decode, training renditions written by pack, and the format-1 upgrade."""

from __future__ import annotations

import io
import json
from pathlib import Path

import lance
import numpy as np
import pytest
from PIL import Image

from robolake.lake import EpisodeFilter, Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.codecs import (
    decode_lossless,
    encode_lossless,
    encode_raw,
    lossless_encoding,
    render_rgb,
)
from robolake.lake.media.frames import (
    JPEG_QUALITY,
    KeyframeEncoder,
    decode_frame,
    decode_row,
    encode_frame,
    fidelity,
    frame_size,
    read_rows,
    render_frame,
    video_gop,
)
from robolake.loaders.collate import decode_views
from robolake.packers import PackSpec, TokenLengthConfig, pack, read_manifest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def _scene(h: int = 96, w: int = 128) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // w, y * 255 // h, (x + y) * 255 // (w + h)], -1).astype(np.uint8)
    img[20:50, 30:70] = (200, 40, 40)
    return img


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255**2 / max(mse, 1e-12))


def test_encode_decode_quality_and_size() -> None:
    img = _scene()
    data = encode_frame(img)
    assert Image.open(io.BytesIO(data)).format == "JPEG"
    assert frame_size(data) == (96, 128)
    assert _psnr(decode_frame(data), img) > 30
    # optimised Huffman tables: never larger than PIL's default tables at the same quality
    plain = io.BytesIO()
    Image.fromarray(img).save(plain, format="JPEG", quality=JPEG_QUALITY)
    assert len(data) <= len(plain.getvalue())
    with pytest.raises(ValueError, match="uint8"):
        encode_frame(img.astype(np.float32))


def test_downscaled_decode_close_to_full_resize() -> None:
    img = _scene(256, 256)
    data = encode_frame(img, quality=95)
    small = decode_frame(data, size=(64, 64))  # DCT-domain scaling then resize
    ref = np.asarray(Image.fromarray(decode_frame(data)).resize((64, 64), Image.Resampling.BILINEAR, reducing_gap=2.0))
    assert small.shape == (64, 64, 3) and _psnr(small, ref) > 28


def test_render_frame() -> None:
    data = encode_frame(_scene(256, 256))
    r = render_frame(data, 64)
    assert frame_size(r) == (64, 64) and len(r) < len(data)
    assert render_frame(r, 64) is r  # already a rendition: kept as is
    png = io.BytesIO()
    Image.fromarray(_scene(64, 64)).save(png, format="PNG")
    assert Image.open(io.BytesIO(render_frame(png.getvalue(), 64))).format == "JPEG"


def test_raw_pixels_are_kept_losslessly_smaller_than_raw() -> None:
    img = _scene(96, 128)
    data = encode_lossless(img)
    np.testing.assert_array_equal(decode_lossless(data, lossless_encoding(96, 128)), img)
    assert encode_lossless(img) == data  # deterministic: the same pixels give the same bytes
    assert len(data) < 0.5 * img.nbytes
    assert encode_raw(img) == (data, "ffv1;size=128x96")
    lossy, enc = encode_raw(img, "jpeg")
    assert enc == "jpeg;q=80" and _psnr(decode_row(lossy, enc), img) > 30
    np.testing.assert_array_equal(decode_row(data, "ffv1;size=128x96", size=(48, 64)).shape, (48, 64, 3))
    with pytest.raises(ValueError, match="frame layout"):
        encode_raw(img, "webp")


def test_each_encoding_says_how_faithful_it_is() -> None:
    assert fidelity("video;codec=h264") == fidelity("jpeg") == fidelity("png") == "source"
    assert fidelity("ffv1;size=64x48") == "lossless"
    assert fidelity("jpeg;q=80") == fidelity("h264;gop=16;crf=22") == fidelity("h264;gop=16") == "lossy"
    assert fidelity("tiff") == "unknown"


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("media")
    generate_synthetic(root / "syn", SyntheticConfig.tiny(image_size=64))
    ingest(str(root / "syn"), str(root / "lake"), IngestConfig(video_frames="jpeg"))
    ingest(str(root / "syn"), str(root / "record"))  # the default
    return root


@pytest.fixture(scope="module")
def lake(media_root) -> Lake:
    return Lake.open(str(media_root / "lake"))


@pytest.fixture(scope="module")
def record(media_root) -> Lake:
    return Lake.open(str(media_root / "record"))


def test_pack_image_size_writes_renditions(lake, tmp_path) -> None:
    tokens = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
    full = pack(lake, PackSpec(max_tokens=512, horizon=4, tokens=tokens), str(tmp_path / "full"))
    small = pack(lake, PackSpec(max_tokens=512, horizon=4, tokens=tokens, image_size=32), str(tmp_path / "small"))
    assert read_manifest(str(tmp_path / "small")).pack_spec.image_size == 32
    assert full.num_samples == small.num_samples
    rows_full = lance.dataset(str(tmp_path / "full" / "shards.lance")).to_table(columns=["frames"])
    rows_small = lance.dataset(str(tmp_path / "small" / "shards.lance")).to_table(columns=["frames"])
    f_full = [f for r in rows_full["frames"].to_pylist() for f in r]
    f_small = [f for r in rows_small["frames"].to_pylist() for f in r]
    assert len(f_full) == len(f_small) > 0
    assert {frame_size(f) for f in f_small} == {(32, 32)}
    assert {frame_size(f) for f in f_full} == {(64, 64)}
    # a quarter of the pixels at q90 against optimised q80 lake frames (measured 0.68x at 64 -> 32 px)
    assert sum(map(len, f_small)) < 0.8 * sum(map(len, f_full))
    # the loader decodes renditions as they are: same pixels as a plain decode, no resize
    views = decode_views(f_small[:5], 32)
    for v, f in zip(views, f_small[:5], strict=True):
        np.testing.assert_array_equal(v, decode_frame(f))


# ------------------------------------------------------------------- key-referenced h264 rows


def _moving(n: int, h: int = 64, w: int = 96) -> list[np.ndarray]:
    out = []
    for t in range(n):
        img = _scene(h, w)
        img[10:26, 4 + 2 * t : 20 + 2 * t] = (30, 200, 60)  # an object that moves every step
        out.append(img)
    return out


def test_video_gop_parses_the_row_encoding() -> None:
    assert video_gop("jpeg") is None and video_gop("png") is None and video_gop("video;codec=h264") is None
    assert video_gop("h264;gop=16") == 16 and video_gop("h264;gop=8;crf=30") == 8
    with pytest.raises(ValueError, match="GOP"):
        video_gop("h264")


def test_keyframe_encoder_every_frame_decodes_from_its_keyframe_alone() -> None:
    frames = _moving(40)
    enc = KeyframeEncoder(64, 96, gop=16)
    packets = [enc.add(x) for x in frames]
    assert enc.encoding == "h264;gop=16;crf=22"
    for t, x in enumerate(frames):
        key = None if t % 16 == 0 else packets[t - t % 16]
        got = decode_row(packets[t], enc.encoding, key)
        assert got.shape == x.shape and _psnr(got, x) > 33, t
    # a P frame is predicted from the keyframe, not from its neighbour: the previous frame is
    # not needed, and decoding after the neighbour instead of the keyframe gives another picture
    assert _psnr(decode_row(packets[20], enc.encoding, packets[16]), frames[20]) > 33
    with pytest.raises(ValueError, match="did not decode"):
        decode_row(packets[20], enc.encoding, None)
    # a rendition size resizes after the decode
    assert decode_row(packets[3], enc.encoding, packets[0], size=(32, 48)).shape == (32, 48, 3)
    with pytest.raises(ValueError, match="even"):
        KeyframeEncoder(63, 96)


def test_keyframe_rows_are_far_smaller_than_jpeg_on_a_mostly_static_scene() -> None:
    frames = _moving(48)
    enc = KeyframeEncoder(64, 96)
    h264 = sum(len(enc.add(x)) for x in frames)
    jpeg = sum(len(encode_frame(x)) for x in frames)
    assert h264 < 0.5 * jpeg


@pytest.fixture(scope="module")
def h264_lake(media_root) -> Lake:
    ingest(str(media_root / "syn"), str(media_root / "lake-h264"), IngestConfig(video_frames="h264", video_crf=24))
    return Lake.open(str(media_root / "lake-h264"))


def test_h264_lake_is_within_the_source_bytes_and_reads_the_same_pictures(lake, h264_lake, media_root) -> None:
    jpeg = lake.dataset("media").to_table(columns=["encoding", "data"])
    media = h264_lake.dataset("media").to_table(columns=["encoding", "data"])
    assert set(jpeg["encoding"].to_pylist()) == {"jpeg;q=80"}  # opt-in, and each row says it is lossy
    assert set(media["encoding"].to_pylist()) == {"h264;gop=16;crf=24"}
    assert h264_lake.summary()["media"]["fidelity"] == {"lossy": h264_lake.count("media")}
    source_bytes = sum(p.stat().st_size for p in (media_root / "syn").rglob("*.mp4"))
    h264_bytes = sum(map(len, media["data"].to_pylist()))
    assert h264_bytes <= 1.5 * source_bytes  # the bound; one JPEG a frame is ~5x
    assert h264_bytes < 0.5 * sum(map(len, jpeg["data"].to_pylist()))
    eps = h264_lake.episodes(columns=["episode_id", "num_steps", "cameras"]).to_pylist()
    keys = [(e["episode_id"], cam, t) for e in eps for cam in e["cameras"] for t in range(e["num_steps"])]
    picks = [keys[i] for i in np.random.default_rng(0).choice(len(keys), 40)]
    frames, jframes = h264_lake.frames(), lake.frames()
    many = frames.read_many(picks)  # one take for the rows, one for their keyframes
    for k, got in zip(picks, many, strict=True):
        np.testing.assert_array_equal(got, frames.read(*k))
        assert _psnr(got, jframes.read(*k)) > 28  # the same picture within coding noise
    assert frames.read_many(picks[:3], size=(32, 32))[0].shape == (32, 32, 3)


def test_pack_of_an_h264_lake_writes_self_contained_jpegs(h264_lake, tmp_path) -> None:
    tokens = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
    for size in (None, 32):
        pack(h264_lake, PackSpec(max_tokens=512, horizon=4, tokens=tokens, image_size=size), str(tmp_path / str(size)))
        rows = (
            lance.dataset(str(tmp_path / str(size) / "shards.lance")).to_table(columns=["frames"])["frames"].to_pylist()
        )
        flat = [f for r in rows for f in r]
        assert flat and all(Image.open(io.BytesIO(f)).format == "JPEG" for f in flat)
        assert {frame_size(f) for f in flat} == {(64, 64) if size is None else (32, 32)}


def test_export_of_an_h264_lake_decodes_every_frame_from_its_keyframe(h264_lake, tmp_path) -> None:
    from robolake.lake.export import export_lerobot

    results = export_lerobot(h264_lake, tmp_path / "out")
    ingest(str(tmp_path / "out"), str(tmp_path / "back"))
    back = Lake.open(str(tmp_path / "back"))
    frames, bframes = h264_lake.frames(), back.frames()
    ids = {(e["embodiment"], e["source_episode_index"]): e["episode_id"] for e in back.episodes().to_pylist()}
    checked = 0
    for r in results:
        order = json.loads((r.path / "meta" / "robolake_export.json").read_text())["episode_ids"]
        for i, eid in enumerate(order):
            ep = h264_lake.episodes(EpisodeFilter(episode_ids=[eid])).to_pylist()[0]
            for t in range(ep["num_steps"]):  # every step: P frames far from and next to their keyframe
                cam = ep["cameras"][0]
                assert _psnr(frames.read(eid, cam, t), bframes.read(ids[(r.embodiment, i)], cam, t)) > 24
                checked += 1
    assert checked == h264_lake.count("steps")


def test_a_keyframe_that_does_not_re_encode_identically_fails_the_episode_by_name(media_root, monkeypatch) -> None:
    from robolake.lake.sources import LeRobotReader, SourceError

    real = KeyframeEncoder._encode

    def drifting(self, frames):  # what a non-deterministic x264 would give: another IDR in the pair
        out = real(self, frames)
        return [out[0] + b"\x00", *out[1:]] if len(frames) == 2 else out

    monkeypatch.setattr(KeyframeEncoder, "_encode", drifting)
    reader = LeRobotReader(str(media_root / "syn" / "single_arm_7dof"), video_frames="h264")
    episode = reader.read_tabular(reader.discover()[0])
    with pytest.raises(
        SourceError, match="frame 1 could not be stored .*re-encoded the keyframe differently.*--frames record"
    ) as err:
        list(reader.read_frames(episode))
    assert err.value.reason_code == "encode_failed" and err.value.path.endswith(".mp4")


def test_an_out_of_order_media_table_is_refused_by_name(tmp_path) -> None:
    import pyarrow as pa

    frames = _moving(20)
    enc = KeyframeEncoder(64, 96, gop=8)
    packets = [enc.add(x) for x in frames]
    order = list(range(20))
    order[8], order[9] = order[9], order[8]  # a keyframe and its first P frame swapped
    ds = lance.write_dataset(
        pa.table(
            {
                "episode_id": ["ep"] * 20,
                "step_index": pa.array(order, pa.int32()),
                "encoding": [enc.encoding] * 20,
                "data": pa.array([packets[i] for i in order], pa.large_binary()),
            }
        ),
        str(tmp_path / "media.lance"),
    )
    assert len(read_rows(ds, [0, 3, 7])) == 3  # the first GOP is in order
    with pytest.raises(ValueError, match=r"episode ep step 10 .* out of order"):
        read_rows(ds, [10])


# --------------------------------------------------------------------- the record and its copies


def _all_keys(lake: Lake) -> list[tuple[str, str, int]]:
    eps = lake.episodes(columns=["episode_id", "num_steps", "cameras"]).to_pylist()
    return [(e["episode_id"], cam, t) for e in eps for cam in e["cameras"] for t in range(e["num_steps"])]


def test_the_default_is_the_record_and_info_says_so(record, lake, media_root, capsys) -> None:
    from robolake.commands.common import print_summary

    media = record.summary()["media"]
    cameras = sum(len(e["cameras"]) for e in record.episodes(columns=["cameras"]).to_pylist())
    assert media["fidelity"] == {"source": record.count("media")} and media["record_streams"] == cameras
    assert set(media["encodings"]) == {"video;codec=h264"}
    print_summary(record.summary())
    print_summary(lake.summary())
    out = capsys.readouterr().out
    assert f"frames: source={record.count('media')} (video;codec=h264: " in out
    assert f"frames: lossy={lake.count('media')} (jpeg;q=80: " in out
    source_bytes = sum(p.stat().st_size for p in (media_root / "syn").rglob("*.mp4"))
    packets = sum(map(len, record.dataset("media").to_table(columns=["data"])["data"].to_pylist()))
    assert packets <= source_bytes  # the source's packets, without their containers


def test_pack_of_a_record_lake_renders_the_exact_frames(record, tmp_path) -> None:
    tokens = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
    pack(record, PackSpec(max_tokens=512, horizon=4, tokens=tokens, image_size=32), str(tmp_path / "p"))
    shards = lance.dataset(str(tmp_path / "p" / "shards.lance")).to_table(
        columns=["episode_id", "step_index", "cameras", "frames"]
    )
    exact = record.frames()
    checked = 0
    for ids, steps, cams, frames in zip(
        *(shards[c].to_pylist() for c in ("episode_id", "step_index", "cameras", "frames")), strict=True
    ):
        views = iter(zip(cams, frames, strict=True))
        for eid, t in zip(ids, steps, strict=True):
            for cam in record.episodes(EpisodeFilter(episode_ids=[eid])).to_pylist()[0]["cameras"]:
                got_cam, data = next(views)
                assert got_cam == cam
                if checked < 40:  # a rendition of the source decode's pixels, byte for byte
                    assert data == render_rgb(exact.read_many([(eid, cam, t)], size=(32, 32))[0], 32)
                checked += 1
    assert checked == sum(len(c) for c in shards["cameras"].to_pylist())


def test_the_materializer_decodes_each_recorded_stream_once(record, monkeypatch) -> None:
    import robolake.packers.materialize as mat
    from robolake.packers.pipeline import materializer_for
    from robolake.packers.samples import build_sample_index

    spec = PackSpec(
        max_tokens=512, horizon=4, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0), image_size=32
    )
    index = build_sample_index(record, spec)
    assert index.recorded is not None and index.recorded[index.media_offset >= 0].all()
    decoded: list[int] = []
    real = mat.record_images
    monkeypatch.setattr(
        mat, "record_images", lambda stream, steps, *a: decoded.append(len(steps)) or real(stream, steps, *a)
    )
    monkeypatch.setattr(mat, "_CACHE", mat.RecordFrameCache())
    m = materializer_for(record, index, spec)
    rng = np.random.default_rng(0)
    bins = [rng.choice(index.num_samples, 3, replace=False) for _ in range(4)]
    first = m.rows(bins, list(range(4)))
    streams = len(decoded)
    assert 0 < streams <= int((index.media_offset >= 0).sum())
    again = m.rows(bins[::-1], list(range(4)))  # the same frames in another call: from the cache, no decode
    assert len(decoded) == streams
    assert first["frames"].to_pylist() == again["frames"].to_pylist()[::-1]


def test_an_access_copy_is_derived_read_first_rebuilt_identically_and_gc_frees_it(media_root, tmp_path) -> None:
    import shutil

    from robolake.lake.upkeep.access import build_access_copy, drop_access_copy
    from robolake.lake.upkeep.gc import gc, parse_age

    shutil.copytree(media_root / "record", tmp_path / "lake")
    lake = Lake.open(str(tmp_path / "lake"))
    keys = _all_keys(lake)
    exact = lake.frames().read_many(keys)
    built = build_access_copy(lake)
    assert (built.streams, built.frames) == (lake.count("streams"), len(keys))
    lake = lake.refresh()
    copy = lake.dataset("access").to_table(columns=["episode_id", "camera", "step_index", "encoding", "data"])
    assert set(copy["encoding"].to_pylist()) == {"h264;gop=16;crf=22"}
    fast = lake.frames()
    picks = [keys[i] for i in np.random.default_rng(0).choice(len(keys), 30)]
    for k, got in zip(picks, fast.read_many(picks), strict=True):
        want = exact[keys.index(k)]
        assert 28 < _psnr(got, want) < 99  # the copy: close, not exact
        np.testing.assert_array_equal(fast.read(*k, exact=True), want)  # the record, on request
    assert build_access_copy(lake).version is None  # complete already
    dropped = drop_access_copy(lake)
    assert dropped.frames == len(keys) and lake.refresh().count("access") == 0
    again = build_access_copy(lake.refresh())  # rebuilt from the record: the same bytes
    rebuilt = lake.refresh().dataset("access").to_table(columns=["episode_id", "camera", "step_index", "data"])
    order = ["episode_id", "camera", "step_index"]
    assert again.frames == len(keys)
    assert rebuilt.sort_by([(c, "ascending") for c in order])["data"].equals(
        copy.sort_by([(c, "ascending") for c in order])["data"]
    )
    drop_access_copy(lake.refresh())
    access_dir = tmp_path / "lake" / "access.lance" / "data"
    before = len(list(access_dir.iterdir()))
    gc(str(tmp_path / "lake"), parse_age("0s"))
    assert before > 0 and len(list(access_dir.iterdir())) == 0  # no kept version names a copy any more
    assert Lake.open(str(tmp_path / "lake")).frames().read_many(picks[:3])[0].shape[2] == 3


def test_ingest_can_write_the_access_copy_and_curation_keeps_it_with_its_episode(media_root, tmp_path) -> None:
    from robolake.curate import delete

    ingest(str(media_root / "syn"), str(tmp_path / "lake"), IngestConfig(access_copy="h264"))
    lake = Lake.open(str(tmp_path / "lake"))
    assert lake.count("access") == lake.count("media") and lake.count("streams") > lake.count("episodes") > 1
    first = sorted(lake.episode_ids())[0]
    delete(str(tmp_path / "lake"), episodes=[first], reason="test")
    after = Lake.open(str(tmp_path / "lake"))
    for table in ("media", "streams", "access"):
        assert after.dataset(table).count_rows(filter=f"episode_id = '{first}'") == 0, table
    assert after.count("access") == after.count("media")


def _make_old(root: Path, fmt: int, tables: tuple[str, ...]) -> None:
    """Make a lake look as an older robolake wrote it: without `tables`, marked format `fmt`."""
    import json
    import shutil

    for table in tables:
        shutil.rmtree(root / f"{table}.lance")
    for path in [root / "_robolake" / "lake.json", *(root / "_robolake" / "versions").glob("*.json")]:
        d = json.loads(path.read_text())
        if "format_version" in d:
            d["format_version"] = fmt
        for table in tables:
            d.get("tables", {}).pop(table, None)
        path.write_text(json.dumps(d))


def test_a_format_2_lake_opens_reads_and_upgrades_on_its_first_write(media_root, tmp_path) -> None:
    import shutil

    from robolake.lake import upgrade_note

    root = tmp_path / "old2"
    shutil.copytree(media_root / "lake", root)
    _make_old(root, 2, ("signals", "events"))
    lake = Lake.open(str(root))  # no upgrade needed to read
    assert lake.format_version == 2 and not lake.has_table("signals")
    assert lake.count("signals") == 0 and lake.to_arrow("events").num_rows == 0
    assert "signals" not in lake.summary()["tables"]
    assert "format 2" in (upgrade_note(str(root)) or "")
    keys = _all_keys(lake)[:3]
    assert len(lake.frames().read_many(keys)) == 3
    res = ingest(str(media_root / "syn"), str(root), IngestConfig(embodiment="again"))
    assert res.ingested == 0 and res.skipped > 0
    after = Lake.open(str(root))
    assert after.format_version == 3 and after.has_table("signals")
    assert after.checkout(1).count("signals") == 0  # a version before the upgrade reads it empty
    assert "upgraded from format 2" in (upgrade_note(str(root)) or "")


def test_a_format_1_lake_is_refused_with_the_upgrade_and_upgrades_in_place(media_root, tmp_path) -> None:
    import shutil

    from robolake.lake.protocol.upgrade import upgrade
    from robolake.schemas import UnsupportedLakeVersionError

    # A format-1 lake, as robolake wrote it before the record: no streams or access table.
    root = tmp_path / "old"
    shutil.copytree(media_root / "lake", root)
    _make_old(root, 1, ("streams", "access", "signals", "events"))
    with pytest.raises(UnsupportedLakeVersionError, match=r"format version 1.*robolake optimize .* --upgrade"):
        Lake.open(str(root))
    report = upgrade(str(root))
    assert (report.from_format, report.to_format, report.created) == (1, 3, ("streams", "access", "signals", "events"))
    assert upgrade(str(root)).created == ()  # idempotent
    lake = Lake.open(str(root))
    first = lake.checkout(1)  # a version from before the upgrade reads the new tables empty
    assert first.count("streams") == 0 and first.summary()["tables"]["access"]["rows"] == 0
    assert "upgraded from format 1" in lake.summary()["media"]["note"]
    keys = _all_keys(lake)[:5]
    assert len(lake.frames().read_many(keys)) == 5  # old rows read as they always did
    res = ingest(str(media_root / "syn"), str(root), IngestConfig(embodiment="again"))
    assert res.ingested == 0 and res.skipped > 0  # same content: nothing twice, and the lake takes writes
