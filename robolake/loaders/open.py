"""`open_batches`: the one function that turns a data source into a `BatchSource` for one rank.

The "shards or lake?" decision is made here and nowhere else:

- a pack output (a directory or prefix holding `manifest.json` + `shards.lance`), or shards
  already opened with `open_shards`: the torch shard loader (`backend="torch"`, DataLoader
  workers, resumable mid-epoch) or the Ray Data stream (`backend="ray"`);
- a lake (a `Lake`, or the URI of one): packed on the fly by `LakeStream` with `spec`, weighted
  by `mix` when given (a mixture of embodiments, tasks, sources or tags: `packers/mix.py`).

Rank and world size come from the caller or, when neither is given, from torchrun's environment
(`robolake.distributed`), read here once and passed to the loader class as constructor arguments
(the loader classes never read the environment themselves). So under `torchrun` every rank opens
only its own share whether or not the process group has started yet.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from robolake.distributed import resolve_rank
from robolake.lake import Lake
from robolake.loaders.config import LoaderConfig
from robolake.loaders.shards import PackedShards
from robolake.packers.manifest import MANIFEST_NAME
from robolake.packers.mix import MixSpec, load_mix
from robolake.packers.spec import PackSpec
from robolake.schemas.batch import BatchSource
from robolake.storage import exists, join_uri, normalize_uri

__all__ = ["Backend", "open_batches", "is_pack_output"]

Backend = Literal["torch", "ray"]


def is_pack_output(source: str, storage_options: dict[str, str] | None = None) -> bool:
    """Whether `source` is a `robolake pack` output (it holds a manifest)."""
    return exists(join_uri(normalize_uri(source), MANIFEST_NAME), storage_options)


def open_batches(
    source: str | Lake | PackedShards,
    config: LoaderConfig | None = None,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    storage_options: dict[str, str] | None = None,
    spec: PackSpec | None = None,
    backend: Backend = "torch",
    lake: Lake | str | None = None,
    mix: MixSpec | str | None = None,
) -> BatchSource:
    """Open `source` as this rank's batch source.

    Args:
        source: A pack output (URI or `PackedShards`), a lake URI, or a `Lake`.
        config: Batch size, image size, shuffle, seed, workers (default `LoaderConfig()`).
        rank: This process's data-parallel rank; with `world_size`, or neither (torchrun's).
        world_size: Number of data-parallel ranks.
        storage_options: Object-store options (Lance names, e.g. `aws_endpoint`).
        spec: How to pack when `source` is a lake (default: window packer, `PackSpec` defaults);
            packed shards have their packing fixed, so it must be None for them.
        backend: For packed shards: "torch" (DataLoader) or "ray" (Ray Data). A lake streams in
            a thread pool and takes "torch".
        lake: For packed shards: check they were packed from this lake at its version.
        mix: For a lake: a weighted mixture (a `MixSpec`, the `--mix` text, or a YAML/JSON file);
            it replaces `spec.mix`. Packed shards hold their mixture already (`pack --mix`).

    Returns:
        A `BatchSource`: iterate per epoch, `set_epoch`, `state_dict` / `load_state_dict`.

    Raises:
        FileNotFoundError: `source` is neither a pack output nor a lake.
        ValueError: an unknown backend, `spec` or `mix` given for shards, backend "ray" for a
            lake or with world size > 1, a config field the chosen source cannot honour, or a
            mixture that names nothing in the lake.
        LineageError: the shards do not come from `lake`.
    """
    if backend not in ("torch", "ray"):
        raise ValueError(f"backend must be 'torch' or 'ray', got {backend!r}")
    config = config or LoaderConfig()
    where = resolve_rank(rank, world_size)
    if isinstance(source, PackedShards) or (isinstance(source, str) and is_pack_output(source, storage_options)):
        shards: PackedShards | str = source
        if spec is not None or mix is not None:
            raise ValueError(
                f"{source} holds packed shards, whose packing (and mixture) is fixed; drop `spec`/`mix`, stream from "
                "the lake, or re-pack with `robolake pack --mix`"
            )
        if backend == "ray":
            from robolake.loaders.ray_stream import RayPackedStream

            return RayPackedStream(
                shards, config, lake=lake, storage_options=storage_options, rank=where.rank, world_size=where.world_size
            )
        from robolake.loaders.torch_loader import PackedLoader

        return PackedLoader(
            shards, config, lake=lake, storage_options=storage_options, rank=where.rank, world_size=where.world_size
        )
    if backend == "ray":
        raise ValueError(
            "streaming straight from a lake runs on a thread pool (backend='torch'); to stream with Ray, "
            "run `robolake pack` first and pass its output"
        )
    from robolake.loaders.lake_stream import LakeStream

    if isinstance(source, Lake):
        lake_source = source
    else:
        try:
            lake_source = Lake.open(str(source), storage_options=storage_options)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{source} is neither a pack output (no {MANIFEST_NAME}) nor a lake ({e}); pass the directory "
                "`robolake pack` wrote or one `robolake ingest` wrote"
            ) from e
    if mix is not None:
        spec = dataclasses.replace(
            spec or PackSpec(algorithm="window"), mix=load_mix(mix) if isinstance(mix, str) else mix
        )
    return LakeStream(lake_source, spec, config, rank=where.rank, world_size=where.world_size)
