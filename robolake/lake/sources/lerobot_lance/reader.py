"""Reader for LeRobot's own Lance layout (`lerobot-lancedb`): frames / videos / meta Lance tables.

The layout (written by `lerobot-lancedb`'s converter, read natively by LeRobot's
`LanceDBDataset`; `robolake export --format lerobot-lance` writes it too, see
`robolake.writers.lerobot_lance`) is a LeRobot v3.0 dataset whose `data/` parquet files became
`frames.lance` (columns with dots made underscores, in `index` order) and whose `videos/` mp4
files became rows of `videos.lance` (the bytes verbatim in a blob column, keyed by video key,
chunk and file). `meta/` stays as it is (info.json says `"storage_format": "lance"`).

So this reader is the LeRobot reader (`lerobot.reader`: metadata checks, plan, tasks,
timestamps, frame counts and sizes, the record) reading its rows and its videos from the
tables instead of files: an episode's rows are the frames table's rows of its episode index
(renamed back to LeRobot's feature keys); its video is its mp4 read out of the blob column into
a temporary file this reader owns (one mp4 at a time, a few kept for the next episodes; each
checked against the read budget first, by the size its blob descriptor declares), from which
the recorded packets are taken exactly as from a v3.0 dataset's file. A blob missing for a file
the metadata names is the episode's `missing_video`, like a missing mp4.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake.query import sql_quote
from robolake.lake.sources.base import EpisodeRef, SourceError
from robolake.lake.sources.columnar import ColumnRecord, seconds_to_ns
from robolake.lake.sources.lerobot.meta import ACTION_KEY, STATE_KEY
from robolake.lake.sources.lerobot.reader import LeRobotReader
from robolake.lake.sources.lerobot.record import record_rows
from robolake.lake.sources.limits import ReadLimits
from robolake.lake.sources.record import Record, record_notes
from robolake.lake.sources.registry import SourceFormat, SourceOptions
from robolake.storage import OutsideRootError, ensure_within

__all__ = ["LeRobotLanceReader", "is_lerobot_lance", "FORMAT"]

log = logging.getLogger(__name__)

FRAMES = "frames.lance"
VIDEOS = "videos.lance"
BLOB = "video_bytes"
_KEEP_FILES = 4  # mp4s held extracted at once (episodes share files, and are read in order)


def is_lerobot_lance(path: str) -> bool:
    """A LeRobot dataset in Lance: `meta/info.json` beside a `frames.lance` table."""
    return os.path.isfile(os.path.join(path, "meta", "info.json")) and os.path.isdir(os.path.join(path, FRAMES))


class LeRobotLanceReader(LeRobotReader):
    """Reads one LeRobot Lance dataset directory (same arguments as `LeRobotReader`).

    Raises:
        SourceError: `bad_metadata` as `LeRobotReader`; `corrupt_file` when frames.lance cannot
            be opened or its row count is not the frames meta/info.json declares.
    """

    def __init__(self, root: str, *, limits: ReadLimits | None = None, **kwargs: Any):
        super().__init__(root, **kwargs)
        self.limits = limits or ReadLimits()
        self.format_name = "lerobot-lance"
        self._columns = {k.replace(".", "_"): k for k in self.info.get("features", {})}
        self._extracted: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._dir: str | None = None
        frames = self._frames()
        declared = self.info.get("total_frames")
        if isinstance(declared, int) and frames.count_rows() != declared:
            raise SourceError(
                "corrupt_file",
                os.path.join(self.root, FRAMES),
                f"frames table has {frames.count_rows()} rows but meta/info.json declares {declared} frames; "
                "the dataset is truncated or was converted against other metadata: convert it again",
            )
        self.meta.video_key_has_files = self._has_video  # type: ignore[method-assign]

    def __getstate__(self) -> dict[str, Any]:  # to Ray workers: no open tables, no extracted files
        state = self.__dict__.copy()
        state["_extracted"], state["_dir"] = OrderedDict(), None
        state.pop("_frames_ds", None)
        state.pop("_videos_ds", None)
        return state

    def _inside(self, table: str) -> str:
        """A table folder of the dataset, refused when a symlink takes it (or its data) out of the dataset.

        Raises:
            SourceError: `outside_source`, naming the table.
        """
        path = os.path.join(self.root, table)
        try:
            ensure_within(self.root, path)
            if os.path.isdir(os.path.join(path, "data")):
                ensure_within(self.root, os.path.join(path, "data"))
        except OutsideRootError:
            raise SourceError(
                "outside_source",
                path,
                f"{table} resolves outside the dataset {self.root} (a symlink out of it); robolake reads a "
                "dataset's own files only: copy the table into the dataset",
            ) from None
        return path

    def _frames(self) -> Any:
        import lance

        if getattr(self, "_frames_ds", None) is None:
            path = self._inside(FRAMES)
            try:
                self._frames_ds = lance.dataset(path)
            except (OSError, ValueError) as e:
                raise SourceError("corrupt_file", path, f"frames table cannot be opened ({e})") from e
        return self._frames_ds

    def _videos(self) -> Any:
        import lance

        if getattr(self, "_videos_ds", None) is None:
            path = self._inside(VIDEOS)
            if not os.path.isdir(path):
                return None
            self._videos_ds = lance.dataset(path)
        return self._videos_ds

    def discover(self) -> list[EpisodeRef]:
        import dataclasses

        return [dataclasses.replace(r, source_format=self.format_name) for r in super().discover()]

    # --- rows --------------------------------------------------------------------------

    def _read_rows(self, ref: EpisodeRef) -> tuple[pa.Table, str]:
        path = os.path.join(self.root, FRAMES)
        try:
            table = self._frames().to_table(filter=f"episode_index = {int(ref.episode_index)}")
        except (OSError, ValueError) as e:
            raise SourceError("corrupt_file", path, f"frames table cannot be read ({e})") from e
        table = table.rename_columns([self._columns.get(c, c) for c in table.column_names])
        if "index" in table.column_names and table.num_rows > 1:
            index = table["index"].to_numpy()
            if (np.diff(index) < 0).any():
                table = table.sort_by("index")
        return table, path

    def _record(
        self, table: pa.Table, path: str, ts: np.ndarray, clock: str, cameras: dict[str, str], metadata: dict[str, Any]
    ) -> Record:
        into = ColumnRecord(path=path, streams=self.streams)
        record_rows(
            table,
            into,
            t_ns=seconds_to_ns(ts),
            clock=clock,
            cameras=cameras,
            mapped=(STATE_KEY, ACTION_KEY, "timestamp", "frame_index", "task_index", "next.success", "success"),
            column_bytes=None,
        )
        built = into.build()
        metadata["record"] = into.metadata(built)
        notes = record_notes(built, path)
        if notes:
            metadata["notes"] = notes
        return built

    # --- videos ------------------------------------------------------------------------

    def _has_video(self, key: str) -> bool:
        videos = self._videos()
        if videos is None:
            return False
        return bool(videos.count_rows(filter=f"video_key = {sql_quote(key)}"))

    def _video_path(self, ref: EpisodeRef, cam: str) -> str | None:
        key = self.plan.video_keys[cam]
        if self.meta.dtype(key) == "image":
            return None
        ep = self.meta.episodes.get(ref.episode_index, {})
        chunk, file = ep.get(f"videos/{key}/chunk_index"), ep.get(f"videos/{key}/file_index")
        where = os.path.join(self.root, VIDEOS)
        if chunk is None or file is None:
            if self.state_only:
                return None
            raise SourceError(
                "missing_video",
                os.path.join(self.root, "meta", "episodes"),
                f"camera {cam!r} ({key}): episode {ref.episode_index} lists no video file; "
                "ingest with --state-only to take state and action alone",
            )
        found = self._extract(key, int(chunk), int(file))
        if found is None and not self.state_only:
            raise SourceError(
                "missing_video",
                where,
                f"camera {cam!r}: videos.lance has no row for {key} chunk {chunk} file {file}, which meta/episodes "
                "names; convert the dataset again, or ingest with --state-only to take state and action alone",
            )
        return found

    def _extract(self, key: str, chunk: int, file: int) -> str | None:
        """The mp4 of (key, chunk, file) as a local file (read out of its blob once, kept a while)."""
        name = (key, chunk, file)
        if name in self._extracted:
            self._extracted.move_to_end(name)
            return self._extracted[name]
        videos = self._videos()
        if videos is None:
            return None
        where = f"video_key = {sql_quote(key)} AND chunk_index = {chunk} AND file_index = {file}"
        where_file = os.path.join(self.root, VIDEOS)
        rows = videos.to_table(columns=[BLOB], filter=where, with_row_id=True)
        if not rows.num_rows:
            return None
        size = int(rows[BLOB].combine_chunks().field("size")[0].as_py())
        self.limits.check_bytes(size, where_file, f"{key} chunk {chunk} file {file}", "holds a video of")
        (blob,) = videos.take_blobs(BLOB, ids=[int(rows["_rowid"][0].as_py())])
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="robolake-lerobot-lance-")
            weakref.finalize(self, shutil.rmtree, self._dir, True)
        path = os.path.join(self._dir, f"{len(self._extracted)}-{chunk}-{file}.mp4")
        with blob, open(path, "wb") as out:
            shutil.copyfileobj(blob, out, 1 << 20)
        self._extracted[name] = path
        while len(self._extracted) > _KEEP_FILES:
            _, old = self._extracted.popitem(last=False)
            os.unlink(old)
        return path

    def inspect(self) -> dict[str, Any]:
        out = super().inspect()
        out["format"] = self.format_name
        out["tables"] = {
            t: {"rows": _rows(os.path.join(self.root, t))}
            for t in (FRAMES, VIDEOS, "meta.lance")
            if os.path.isdir(os.path.join(self.root, t))
        }
        for row in out.get("keys", {}).values():
            row.setdefault("role", "")
        return out


def _rows(path: str) -> int:
    import lance

    return int(lance.dataset(path).count_rows())


def _open(path: str, options: SourceOptions) -> LeRobotLanceReader:
    return LeRobotLanceReader(
        path,
        embodiment=options.embodiment,
        state_only=options.state_only,
        video_frames=options.video_frames,
        video_crf=options.video_crf,
        streams=options.streams,
        limits=options.limits,
    )


FORMAT = SourceFormat(
    name="lerobot-lance",
    description="LeRobot's Lance layout (lerobot-lancedb): meta/ + frames.lance, videos.lance (blob), meta.lance",
    detect=is_lerobot_lance,
    open=_open,
    unit="directory",
)
