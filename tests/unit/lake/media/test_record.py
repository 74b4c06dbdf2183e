"""The record layout: a source video's own packets in the lake, decoding to exactly the source's pixels.

Every check compares against decoding the source file with PyAV from its start (what the source
decode is), frame for frame, max abs difference 0: on h264 with B-frames and episodes that
start mid-GOP (one mp4 holding three episodes, keyframes where the encoder put them), on AV1
LeRobot v3.0 written by `robolake.writers` (many episodes per file; and re-encoded so episodes
start mid-GOP), and, where ../shared is present, on the real GR00T data (h264). `read_many` is
checked to feed each needed packet once, from memory.
"""

from __future__ import annotations

import glob
import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.lake.media.record import StreamIndex, is_record, record_encoding
from robolake.lake.sources import discover_readers
from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset
from robolake.writers.video import VideoOptions, encode_video
from tests.fixtures import copy_pick_n_place

FPS = 20


_TEXTURE = np.random.default_rng(7).integers(0, 64, size=(240, 320, 3), dtype=np.uint8)


def _scene(t: int, h: int = 96, w: int = 128, textured: bool = False) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // w + t) % 256, y * 255 // h, ((x + y) * 255 // (w + h) + 3 * t) % 256], -1).astype(
        np.uint8
    )
    if textured:  # camera-like detail, so that packets are a realistic size next to the per-packet index
        img = (img // 2 + np.roll(_TEXTURE[:h, :w], 2 * t, axis=1)).astype(np.uint8)
    img[10 + t % 40 : 40 + t % 40, 20:60] = (200, 40, 40)  # a block that moves every step
    return img


def _dataset(
    root: Path, codec: str, lengths: tuple[int, ...] = (30, 37, 44), size: tuple[int, int] = (96, 128)
) -> Path:
    """A LeRobot v3.0 dataset: every episode in one mp4 (one camera), frames moving continuously."""
    rng = np.random.default_rng(0)
    eps, t0 = [], 0
    for n in lengths:
        eps.append(
            EpisodeArrays(
                state=rng.normal(size=(n, 4)),
                action=rng.normal(size=(n, 3)),
                task=f"task {t0}",
                frames={
                    "observation.images.front": np.stack(
                        [_scene(t0 + t, *size, textured=size != (96, 128)) for t in range(n)]
                    )
                },
            )
        )
        t0 += n
    return write_lerobot_dataset(
        root, episodes=eps, fps=FPS, robot_type="test_bot", version="v3.0", video=codec, episodes_per_file=10
    )


def _source_frames(src: str) -> dict[tuple[int, str], list[np.ndarray]]:
    """(episode index, camera) -> the source decode's frames of the episode's span (PyAV, from the file start)."""
    out = {}
    for reader in discover_readers(src).readers:
        for ref in reader.discover():
            for cam in reader.cameras:
                path = os.path.join(reader.root, ref.get(f"video:{cam}"))
                lo, hi, half = ref.get(f"from:{cam}"), ref.get(f"to:{cam}"), 0.5 / reader.fps
                with av.open(path) as c:
                    s = c.streams.video[0]
                    out[(ref.episode_index, cam)] = [
                        f.to_ndarray(format="rgb24")
                        for f in c.decode(s)
                        if (lo is None or f.pts * s.time_base >= lo - half)
                        and (hi is None or f.pts * s.time_base < hi - half)
                    ]
    return out


def _assert_bit_exact(src: str, lake: Lake) -> int:
    """Every frame of the lake equals the source decode's (read_many of all, and one at a time)."""
    want = _source_frames(src)
    frames = lake.frames()
    checked = 0
    for ep in lake.episodes().to_pylist():
        for cam in ep["cameras"]:
            ref = want[(ep["source_episode_index"], cam)]
            assert len(ref) == ep["num_steps"]
            keys = [(ep["episode_id"], cam, t) for t in range(ep["num_steps"])]
            rng = np.random.default_rng(checked)
            shuffled = [keys[i] for i in rng.permutation(len(keys))]
            for key, got in zip(shuffled, frames.read_many(shuffled), strict=True):
                assert np.abs(got.astype(int) - ref[key[2]]).max() == 0, key
                checked += 1
            for t in (0, ep["num_steps"] // 2, ep["num_steps"] - 1):  # one a call: a fresh run from its keyframe
                np.testing.assert_array_equal(frames.read(ep["episode_id"], cam, t), ref[t])
    return checked


def _source_video_bytes(src: str) -> int:
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(src, "**", "*.mp4"), recursive=True))


def _record_bytes(lake: Lake) -> int:
    """What the record holds for frames: packet bytes, extra packets, extradata and the per-packet
    index (21 bytes a packet; the streams table's file overhead, a few kB, is not counted here:
    `robolake bench scale` reports the bytes on disk)."""
    media = sum(len(b) for b in lake.dataset("media").to_table(columns=["data"])["data"].to_pylist())
    streams = [StreamIndex.from_row(r) for r in lake.dataset("streams").to_table().to_pylist()]
    return media + sum(s.index_bytes for s in streams)


@pytest.fixture(scope="module")
def mid_gop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lake]:
    """h264 with B-frames, one mp4 re-encoded as one continuous stream: keyframes every 25 frames, so
    episodes start mid-GOP and need packets of the episode before them."""
    root = tmp_path_factory.mktemp("midgop")
    src = _dataset(root / "src", "h264")
    (mp4,) = glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)
    with av.open(mp4) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    encode_video(mp4, [frames], fps=FPS, options=VideoOptions(gop=25))  # one segment: no keyframe at episode starts
    ingest(str(src), str(root / "lake"), IngestConfig(execution="local"))
    return src, Lake.open(str(root / "lake"))


def test_mid_gop_episodes_with_b_frames_decode_bit_exact(mid_gop) -> None:
    src, lake = mid_gop
    with av.open(glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)[0]) as c:
        assert c.streams.video[0].codec_context.has_b_frames  # decode order differs from step order
        packets = [p for p in c.demux(video=0) if p.size]
        assert any(p.pts != p.dts for p in packets)
    streams = [StreamIndex.from_row(r) for r in lake.dataset("streams").to_table().to_pylist()]
    assert any(len(s.extra) for s in streams), "no episode started mid-GOP: the test data lost its point"
    assert {lake.dataset("media").to_table(columns=["encoding"])["encoding"][0].as_py()} == {record_encoding("h264")}
    assert _assert_bit_exact(str(src), lake) == lake.count("media")


def test_a_shared_file_is_kept_once(mid_gop) -> None:
    src, lake = mid_gop
    with av.open(glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)[0]) as c:
        sizes = [p.size for p in c.demux(video=0) if p.size]
    packet_bytes = sum(sizes)
    streams = [StreamIndex.from_row(r) for r in lake.dataset("streams").to_table().to_pylist()]
    own = sum(len(b) for b in lake.dataset("media").to_table(columns=["data"])["data"].to_pylist())
    assert own == packet_bytes  # each packet once, in the episode whose span holds it
    extra = sum(sum(map(len, s.extra)) for s in streams)
    assert 0 < extra <= 2 * packet_bytes / len(sizes) * 25  # at most a GOP of lead-in for each of two later episodes


def test_read_many_feeds_each_needed_packet_once_from_memory(mid_gop, monkeypatch) -> None:
    """Frames wanted from two GOPs, shuffled and repeated: one pass per GOP run, each packet fed
    once, exactly the runs' packets, and no container opened (the packets are already in memory)."""
    import robolake.lake.media.frames as media

    _, lake = mid_gop
    ep = max(lake.episodes().to_pylist(), key=lambda e: e["num_steps"])
    eid, cam, n = ep["episode_id"], ep["cameras"][0], ep["num_steps"]
    reader = lake.frames()
    stream = reader.stream(eid, cam)
    assert stream is not None
    steps = [n - 1, 3, n - 2, 4, 0, 3, n - 1]
    runs = stream.runs(steps)
    assert 1 <= len(runs) <= 2 and int(stream.start_of[n - 1]) > int(stream.step_packet[4])  # two GOPs apart
    want = [reader.read(eid, cam, t) for t in steps]  # one a call: each a fresh run (bit-exact: tests above)
    fed: list[int] = []
    calls: list[int] = []
    real = media.decode_runs

    def counting(index, runs_, packet):  # the real decoder, its packet lookups counted
        calls.append(len(runs_))
        return real(index, runs_, lambda s: fed.append(s) or packet(s))

    monkeypatch.setattr(media, "decode_runs", counting)
    monkeypatch.setattr(av, "open", lambda *a, **k: pytest.fail("read_many opened a container"))
    got = reader.read_many([(eid, cam, t) for t in steps])
    assert calls == [len(runs)]
    assert len(fed) == len(set(fed)) and sorted(fed) == stream.owned_steps(runs)
    assert len(fed) < n  # the packets between the two runs are never fed
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_scaled_reads_convert_and_scale_in_one_pass_close_to_a_resize_of_the_exact_frame(mid_gop) -> None:
    """`read_many(size=...)` of a recorded frame: swscale's one-pass conversion and scale of the
    decoded picture (what `pack` renders), the same every call, and in brightness close to a PIL
    resize of the exact RGB frame. Not byte for byte: the filters differ, and the 4:2:0 chroma is
    scaled from its own quarter-size planes, so sharp coloured edges differ more than luma."""
    from robolake.lake.media.codecs import resize_rgb

    _, lake = mid_gop
    reader = lake.frames()
    ep = lake.episodes().to_pylist()[0]
    keys = [(ep["episode_id"], ep["cameras"][0], t) for t in range(0, ep["num_steps"], 5)]
    small = reader.read_many(keys, size=(24, 32))
    again = reader.read_many(list(reversed(keys)), size=(24, 32))
    for got, same, key in zip(small, reversed(again), keys, strict=True):
        assert got.shape == (24, 32, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, same)
        ref = resize_rgb(reader.read(*key), (24, 32)).astype(np.float64).mean(-1)
        mse = float(np.mean((ref - got.astype(np.float64).mean(-1)) ** 2))
        assert 10 * np.log10(255.0**2 / max(mse, 1e-9)) >= 35.0
    full = reader.read_many(keys[:1], size=(96, 128))[0]  # the frame's own size: exactly the record
    np.testing.assert_array_equal(full, reader.read(*keys[0]))


@pytest.fixture(scope="module")
def av1_mid_gop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lake]:
    """AV1 LeRobot v3.0, one file of three episodes re-encoded as one stream, keyframes every 25
    frames: the later episodes start mid-GOP."""
    root = tmp_path_factory.mktemp("av1midgop")
    src = _dataset(root / "src", "av1")
    (mp4,) = glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)
    with av.open(mp4) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
    encode_video(mp4, [frames], fps=FPS, options=VideoOptions(codec="av1", gop=25))
    ingest(str(src), str(root / "lake"), IngestConfig(execution="local"))
    return src, Lake.open(str(root / "lake"))


def test_av1_episodes_that_start_mid_gop_decode_bit_exact_and_the_file_is_kept_once(av1_mid_gop) -> None:
    src, lake = av1_mid_gop
    streams = [StreamIndex.from_row(r) for r in lake.dataset("streams").to_table().to_pylist()]
    assert {s.codec for s in streams} == {"av1"} and len({s.source_path for s in streams}) == 1 < len(streams)
    assert any(len(s.extra) for s in streams), "no AV1 episode started mid-GOP: the test data lost its point"
    assert _assert_bit_exact(str(src), lake) == lake.count("media")
    with av.open(glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)[0]) as c:
        packet_bytes = sum(p.size for p in c.demux(video=0) if p.size)
    own = sum(len(b) for b in lake.dataset("media").to_table(columns=["data"])["data"].to_pylist())
    assert own == packet_bytes  # each packet once, in the episode whose span holds it


@pytest.fixture(scope="module")
def av1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lake]:
    root = tmp_path_factory.mktemp("av1")
    src = _dataset(root / "src", "av1", lengths=(12, 15, 10), size=(240, 320))
    ingest(str(src), str(root / "lake"), IngestConfig(execution="local"))
    return src, Lake.open(str(root / "lake"))


def test_av1_v3_many_episodes_per_file_bit_exact_and_within_the_source_bytes(av1) -> None:
    src, lake = av1
    assert len(glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)) == 1  # three episodes, one file
    rows = lake.dataset("streams").to_table(columns=["codec", "decoder", "source_path"]).to_pylist()
    assert {r["codec"] for r in rows} == {"av1"} and len({r["source_path"] for r in rows}) == 1
    assert _assert_bit_exact(str(src), lake) == lake.count("media")
    assert _record_bytes(lake) <= 1.02 * _source_video_bytes(str(src))


def test_real_gr00t_h264_is_bit_exact_and_within_the_source_bytes(tmp_path: Path) -> None:
    src = copy_pick_n_place(tmp_path)
    ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    lake = Lake.open(str(tmp_path / "lake"))
    assert set(lake.summary()["media"]["fidelity"]) == {"source"}
    assert _record_bytes(lake) <= 1.02 * _source_video_bytes(str(src))
    want = _source_frames(str(src))
    frames = lake.frames()
    for ep in lake.episodes().to_pylist():  # a spread of steps, deep into the 250-frame GOPs
        cam = ep["cameras"][0]
        steps = sorted({0, 1, 2, 124, 249, 250, 251, ep["num_steps"] - 1} & set(range(ep["num_steps"])))
        for t, got in zip(steps, frames.read_many([(ep["episode_id"], cam, t) for t in steps]), strict=True):
            assert np.abs(got.astype(int) - want[(ep["source_episode_index"], cam)][t]).max() == 0


# ------------------------------------------------------------------------------ the stream index


def _index(pts: list[int], keys: list[int], steps: list[int] | None = None, extra: int = 0) -> StreamIndex:
    n = len(pts)
    order = np.argsort(pts, kind="stable")
    step = np.empty(n, dtype=np.int32)
    step[order] = np.arange(n) - extra
    if steps is not None:
        step = np.asarray(steps, dtype=np.int32)
    return StreamIndex(
        codec="h264",
        decoder="h264",
        extradata=b"",
        width=2,
        height=2,
        time_base=Fraction(1, FPS),
        packet_step=step,
        packet_pts=pts,
        packet_dts=list(range(n)),
        packet_key=[i in keys for i in range(n)],
        extra=tuple(b"x" for _ in range(int((step < 0).sum()))),
    )


def test_runs_start_at_the_keyframe_and_merge_so_no_packet_is_fed_twice() -> None:
    # decode order I0 P3 B1 B2 | I4 P7 B5 B6 (pts), keyframes at packets 0 and 4
    idx = _index([0, 3, 1, 2, 4, 7, 5, 6], keys=[0, 4])
    assert idx.start_of.tolist() == [0, 0, 0, 0, 4, 4, 4, 4]
    assert idx.step_packet.tolist() == [0, 2, 3, 1, 4, 6, 7, 5]
    (run,) = idx.runs([2])
    assert (run.start, run.end, run.steps) == (0, 3, (2,))  # step 2 is packet 3: its references come first
    runs = idx.runs([1, 6, 2])
    assert [(r.start, r.end, r.steps) for r in runs] == [(0, 7, (1, 2, 6))]  # touching runs: one pass
    runs = idx.runs([0, 5])
    assert [(r.start, r.end) for r in runs] == [(0, 0), (4, 6)]
    assert idx.owned_steps(runs) == [0, 4, 5, 7]  # packets 4..6 carry steps 4, 7 and 5
    with pytest.raises(KeyError, match="outside"):
        idx.runs([8])


def test_an_open_gop_leading_picture_starts_one_keyframe_earlier() -> None:
    # the second keyframe (packet 3, pts 4) is followed in decode order by a picture shown before it
    idx = _index([0, 2, 1, 4, 3, 5], keys=[0, 3])
    step_of_pts3 = int(idx.packet_step[4])
    assert idx.start_of[step_of_pts3] == 0  # pts 3 < the keyframe's pts 4: decode from the keyframe before
    assert idx.start_of[int(idx.packet_step[5])] == 3


def test_the_streams_row_round_trips_and_a_damaged_one_is_refused() -> None:
    idx = _index([0, 3, 1, 2], keys=[0])
    back = StreamIndex.from_row(idx.to_row("ep", "front"))
    for name in ("packet_step", "packet_pts", "packet_dts", "packet_key"):
        np.testing.assert_array_equal(getattr(back, name), getattr(idx, name))
    assert back.time_base == idx.time_base and is_record(record_encoding("hevc")) and not is_record("jpeg")
    with pytest.raises(ValueError, match="exactly one packet"):
        _index([0, 1], keys=[0], steps=[0, 0])
    with pytest.raises(ValueError, match="extra packets"):
        StreamIndex(
            codec="h264",
            decoder="h264",
            extradata=b"",
            width=2,
            height=2,
            time_base=Fraction(1, 20),
            packet_step=[-1, 0],
            packet_pts=[0, 1],
            packet_dts=[0, 1],
            packet_key=[True, False],
        )


def test_a_garbage_packet_is_quarantined_at_ingest_not_found_at_training(tmp_path: Path) -> None:
    src = _dataset(tmp_path / "src", "h264", lengths=(20,))
    (mp4,) = glob.glob(str(src / "videos" / "**" / "*.mp4"), recursive=True)
    data = bytearray(Path(mp4).read_bytes())
    with av.open(mp4) as c:
        p = [p for p in c.demux(video=0) if p.size][5]
        pos, size = int(p.pos), int(p.size)
    data[pos + 4 : pos + size] = b"\xff" * (size - 4)  # the container is intact, one packet is noise
    Path(mp4).write_bytes(bytes(data))
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    if res.ingested:  # the decoder concealed the damage: then it must still read back as the source decodes it
        _assert_bit_exact(str(src), Lake.open(str(tmp_path / "lake")))
    else:
        assert (
            res.quarantined == 1
            and "corrupt_video" in Lake.open(str(tmp_path / "lake")).to_arrow("quarantine")["reason_code"].to_pylist()
        )
