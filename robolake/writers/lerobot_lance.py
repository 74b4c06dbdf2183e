"""Write LeRobot's own Lance layout (`lerobot-lancedb`): a LeRobot v3.0 dataset as three Lance tables.

LeRobot reads a dataset stored in Lance natively (`LanceDBDataset`, vendored today in the
`lerobot-lancedb` package as `lerobot_lancedb.reader`, and its converter `convert.py`). The
layout, as that package's code defines it (0.3.1), and as written here::

    meta/          LeRobot v3.0 metadata, copied, with `"storage_format": "lance"` in info.json
    frames.lance   one row per frame: the data/ parquet columns with dots made underscores
                   (`observation.state` -> `observation_state`), list features as fixed-size lists,
                   in `index` order (row N is absolute frame N: the loader reads by row id)
    videos.lance   one row per mp4 of videos/: video_key, chunk_index, file_index, the byte index
                   (file_size, moov_offset, moov_size, kf_indices, kf_positions) and the file's bytes
                   verbatim in the blob (v2) column `video_bytes`
    meta.lance     one row per file of meta/ (path relative to meta/, data): meta/ for remote roots

Scalar indexes on frames.episode_index (btree), frames.task_index and videos.video_key (bitmap)
make SQL over the tables fast, as the converter's do; the loader does not need them.

Nothing is re-encoded: this is a change of container over a finished v3.0 dataset, so the v3.0
writer (`writers.lerobot`) stays the one place that decides rows, files and statistics, and a
dataset exported either way holds the same frames and numbers. The tables are written into
`<root>.robolake-partial` and renamed into place at the end, like the v3.0 writer's datasets.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robolake.writers.lerobot import PARTIAL_SUFFIX

__all__ = [
    "FRAMES_TABLE",
    "VIDEOS_TABLE",
    "META_TABLE",
    "VIDEO_BLOB_COLUMN",
    "VIDEO_INDEX_COLUMNS",
    "lance_column",
    "video_byte_index",
    "write_lerobot_lance",
]

FRAMES_TABLE = "frames"
VIDEOS_TABLE = "videos"
META_TABLE = "meta"
VIDEO_BLOB_COLUMN = "video_bytes"
VIDEO_INDEX_COLUMNS = ("file_size", "moov_offset", "moov_size", "kf_indices", "kf_positions")
BLOB_STORAGE_VERSION: Literal["2.2"] = "2.2"  # the first Lance file version with blob v2 columns


def lance_column(key: str) -> str:
    """A LeRobot feature's column name in frames.lance (`observation.state` -> `observation_state`)."""
    return key.replace(".", "_")


def _find_moov(f: Any, size: int) -> tuple[int, int]:
    offset = 0
    while offset < size:
        f.seek(offset)
        header = f.read(16)
        box = int.from_bytes(header[:4], "big")
        if box == 1:
            box = int.from_bytes(header[8:16], "big")
        elif box == 0:
            box = size - offset
        if header[4:8] == b"moov":
            return offset, box
        if box < 8:
            break
        offset += box
    raise ValueError("no moov box: not an mp4 file")


def video_byte_index(path: Path) -> dict[str, Any]:
    """The videos table's byte-index columns of one mp4 (keyframe frame numbers and byte positions,
    the moov box), as the LeRobot Lance loader plans its range reads from them."""
    import av

    size = path.stat().st_size
    entries = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        fps = float(stream.average_rate or 0)
        for packet in container.demux(stream):
            if packet.pts is None or not packet.is_keyframe or packet.pos is None:
                continue
            entries.append((round(float(packet.pts * packet.time_base) * fps), int(packet.pos)))
    entries.sort()
    with path.open("rb") as f:
        moov_offset, moov_size = _find_moov(f, size)
    return {
        "file_size": size,
        "moov_offset": moov_offset,
        "moov_size": moov_size,
        "kf_indices": [i for i, _ in entries],
        "kf_positions": [p for _, p in entries],
    }


def _frames(files: list[Path]) -> pa.RecordBatchReader:
    """data/ parquet rows as frames.lance batches, in index order (checked)."""
    first = pq.read_schema(files[0])
    fields, widths = [], {}
    for f in first:
        if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            col = pq.read_table(files[0], columns=[f.name]).column(f.name)
            widths[f.name] = len(col[0]) if len(col) else 0
            fields.append(pa.field(lance_column(f.name), pa.list_(f.type.value_type, widths[f.name])))
        else:
            fields.append(pa.field(lance_column(f.name), f.type))
    schema = pa.schema(fields)

    def batches() -> Iterator[pa.RecordBatch]:
        last = -1
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches():
                if not batch.num_rows:
                    continue
                index = batch.column("index").to_numpy()
                if index[0] <= last or (len(index) > 1 and (index[1:] < index[:-1]).any()):
                    raise ValueError(f"{path}: rows are not in index order; the dataset's data/ files are damaged")
                last = int(index[-1])
                cols = []
                for f in first:
                    col = batch.column(f.name)
                    if f.name in widths:
                        col = pa.FixedSizeListArray.from_arrays(pc.list_flatten(col), widths[f.name])
                    cols.append(col)
                yield pa.RecordBatch.from_arrays(cols, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _stamp(info_path: Path) -> None:
    info = json.loads(info_path.read_text())
    info["storage_format"] = "lance"
    info_path.write_text(json.dumps(info, indent=4))


def write_lerobot_lance(src: str | Path, out: str | Path) -> Path:
    """Write the LeRobot v3.0 dataset at `src` as LeRobot's Lance layout at `out` (new or empty).

    Returns:
        `out`.

    Raises:
        FileExistsError: `out` exists and is not empty.
        ValueError: `src` is not a LeRobot v3.0 dataset, or its data/ rows are out of index order.
    """
    import lance
    from lance import blob_array, blob_field

    src, out = Path(src), Path(os.path.abspath(out))
    info = json.loads((src / "meta" / "info.json").read_text()) if (src / "meta" / "info.json").is_file() else {}
    if info.get("codebase_version") != "v3.0":
        raise ValueError(f"{src} is not a LeRobot v3.0 dataset (meta/info.json codebase_version); export it first")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; write into a new directory or remove it first")
    tmp = out.with_name(out.name + PARTIAL_SUFFIX)
    if tmp.exists():
        shutil.rmtree(tmp)  # a killed writer's leftovers: never a finished dataset
    shutil.copytree(src / "meta", tmp / "meta")
    _stamp(tmp / "meta" / "info.json")

    meta_files = sorted(p for p in (tmp / "meta").rglob("*") if p.is_file())
    meta_schema = pa.schema([pa.field("path", pa.string()), pa.field("data", pa.large_binary())])
    lance.write_dataset(
        pa.Table.from_pylist(
            [{"path": p.relative_to(tmp / "meta").as_posix(), "data": p.read_bytes()} for p in meta_files],
            schema=meta_schema,
        ),
        str(tmp / f"{META_TABLE}.lance"),
    )

    data = sorted((src / "data").rglob("*.parquet"))
    if not data:
        raise ValueError(f"{src} has no data/ parquet files")
    frames = lance.write_dataset(_frames(data), str(tmp / f"{FRAMES_TABLE}.lance"))
    frames.create_scalar_index("episode_index", "BTREE")
    frames.create_scalar_index("task_index", "BITMAP")

    schema = pa.schema(
        [
            pa.field("video_key", pa.string()),
            pa.field("chunk_index", pa.int64()),
            pa.field("file_index", pa.int64()),
            pa.field("file_size", pa.int64()),
            pa.field("moov_offset", pa.int64()),
            pa.field("moov_size", pa.int64()),
            pa.field("kf_indices", pa.list_(pa.int64())),
            pa.field("kf_positions", pa.list_(pa.int64())),
            blob_field(VIDEO_BLOB_COLUMN),
        ]
    )
    videos = sorted((src / "videos").rglob("*.mp4")) if (src / "videos").is_dir() else []

    def video_batches() -> Iterator[pa.RecordBatch]:
        for mp4 in videos:  # one file a batch: memory is one mp4
            row = {
                "video_key": mp4.parts[-3],
                "chunk_index": int(mp4.parent.name.split("-")[1]),
                "file_index": int(mp4.stem.split("-")[1]),
                **video_byte_index(mp4),
            }
            cols = [pa.array([row[f.name]], type=f.type) for f in schema if f.name != VIDEO_BLOB_COLUMN]
            yield pa.RecordBatch.from_arrays([*cols, blob_array([mp4.read_bytes()])], schema=schema)

    table = lance.write_dataset(
        pa.RecordBatchReader.from_batches(schema, video_batches()),
        str(tmp / f"{VIDEOS_TABLE}.lance"),
        schema=schema,
        data_storage_version=BLOB_STORAGE_VERSION,
    )
    if videos:
        table.create_scalar_index("video_key", "BITMAP")
    if out.exists():
        out.rmdir()  # empty, checked above
    os.replace(tmp, out)
    return out
