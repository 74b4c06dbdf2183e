"""robolake's side of the comparisons: the data it is fed (ingested, packed, exported) and one epoch
of its loader.

robolake's loader reads shards packed from the lake with the frames at the size handed out
(`robolake pack --image-size`), so it decodes small JPEGs and never resizes; the ingest and pack
seconds are paid once per dataset, not per epoch, and are reported beside the rates. The
LeRobot side reads the same frames from a LeRobot v3.0 export whose h264 packets are copied
from the source (`robolake export --copy-video`: the same frames, the same keyframes).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["drain", "prepare", "prepare_sized"]


def drain(loader: Any) -> tuple[int, list[int]]:
    """Iterate one epoch of robolake's loader: (samples, the shape of one batch's pixels)."""
    samples, shape = 0, []
    for batch in loader:
        samples += batch.num_samples
        shape = list(batch.pixels.shape[1:])
    return samples, shape


def prepare(name: str, src: str, work: Path, step_stride: int) -> tuple[Any, dict[str, float]]:
    """Ingest `src` and pack it at the model's input size (`bench load`'s IMAGE_SIZE). Returns
    `bench load`'s Prepared and the seconds of each offline step."""
    from robolake.bench.load import HORIZON, IMAGE_SIZE, MAX_TOKENS, Prepared
    from robolake.lake import Lake, ingest
    from robolake.loaders import open_shards
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.training import ModelConfig

    lake_dir, packed_dir = work / name / "lake", work / name / "packed"
    t0 = time.perf_counter()
    ingest(src, str(lake_dir))
    t1 = time.perf_counter()
    lake = Lake.open(str(lake_dir))
    tokens = TokenLengthConfig(tokens_per_view=ModelConfig.preset("tiny").tokens_per_view, state_tokens=0)
    spec = PackSpec(
        max_tokens=MAX_TOKENS, horizon=HORIZON, step_stride=step_stride, tokens=tokens, image_size=IMAGE_SIZE
    )
    pack(lake, spec, str(packed_dir))
    t2 = time.perf_counter()
    return Prepared(name, src, lake, spec, open_shards(str(packed_dir), lake=lake)), {
        "ingest_s": t1 - t0,
        "pack_s": t2 - t1,
    }


def prepare_sized(src: str, work: Path, step_stride: int, image_size: int) -> tuple[Any, Path, Path]:
    """The real data ingested, packed at `image_size` for robolake's loader, exported to v3.0 with
    its h264 packets copied, then given its h264 access copy (`robolake optimize --access-copy
    h264`: what a lake read at random frames is given; the export read the record).

    Returns (`bench load`'s Prepared, the v3.0 export, the pack output directory).
    """
    from robolake.bench.load import HORIZON, MAX_TOKENS, Prepared
    from robolake.lake import ExportConfig, Lake, build_access_copy, export_lerobot, ingest
    from robolake.loaders import open_shards
    from robolake.packers import PackSpec, TokenLengthConfig, pack
    from robolake.training import ModelConfig

    lake_dir, packed_dir, v3 = work / "lake", work / "packed", work / "lerobot-v3"
    ingest(src, str(lake_dir))
    lake = Lake.open(str(lake_dir))
    tokens = TokenLengthConfig(tokens_per_view=ModelConfig.preset("tiny").tokens_per_view, state_tokens=0)
    spec = PackSpec(
        max_tokens=MAX_TOKENS, horizon=HORIZON, step_stride=step_stride, tokens=tokens, image_size=image_size
    )
    pack(lake, spec, str(packed_dir))
    export_lerobot(lake, v3, config=ExportConfig(copy_video=True))
    shards = open_shards(str(packed_dir), lake=lake)
    build_access_copy(lake)
    return Prepared("real", src, lake, spec, shards), v3, packed_dir
