"""`stream()`: one call from a notebook to PackedBatches, whatever the source.

- A pack output (a directory or prefix holding `manifest.json` + `shards.lance`) is read with the
  torch `PackedLoader` (backend "torch") or the Ray Data `RayPackedStream` (backend "ray").
- A lake (a `Lake`, or the URI of one) is packed on the fly by `LakeStream` with `spec`.

Training jobs that shard across ranks or resume should build `PackedLoader` / `RayPackedStream`
themselves; `stream` is the quick path and returns a plain iterator over one epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from robolake.lake.lake import Lake
from robolake.lake.storage import exists, join_uri, normalize_uri
from robolake.loaders.batch import PackedBatch
from robolake.loaders.shards import LoaderConfig
from robolake.packers.manifest import MANIFEST_NAME
from robolake.packers.spec import PackSpec

__all__ = ["stream"]

Backend = Literal["torch", "ray"]


def stream(
    source: str | Lake,
    *,
    backend: Backend = "torch",
    config: LoaderConfig | None = None,
    spec: PackSpec | None = None,
    lake: Lake | str | None = None,
    epoch: int = 0,
    storage_options: dict[str, str] | None = None,
) -> Iterator[PackedBatch]:
    """Iterate one epoch of PackedBatches from packed shards or straight from a lake.

    Args:
        source: A pack output directory / URI, a lake URI, or a Lake.
        backend: "torch" (DataLoader workers) or "ray" (Ray Data) for packed shards; for a lake,
            "torch" materialises in a thread pool and "ray" is not supported.
        config: Batch size, image size, shuffle, seed, workers (default `LoaderConfig()`).
        spec: How to pack when `source` is a lake (default `PackSpec()`); not used for shards.
        lake: For shards: check they were packed from this lake at its version.
        epoch: The epoch whose shuffle to use.
        storage_options: Object-store options.

    Returns:
        An iterator of PackedBatch.

    Raises:
        ValueError: an unknown backend, `spec` given for shards, or backend "ray" for a lake.
        FileNotFoundError: `source` is neither a pack output nor a lake.
        LineageError: the shards do not come from `lake`.
    """
    if backend not in ("torch", "ray"):
        raise ValueError(f"backend must be 'torch' or 'ray', got {backend!r}")
    config = config or LoaderConfig()
    if isinstance(source, Lake) or not exists(join_uri(normalize_uri(source), MANIFEST_NAME), storage_options):
        if backend == "ray":
            raise ValueError(
                "streaming straight from a lake runs on a thread pool (backend='torch'); to stream with Ray, "
                "run `robolake pack` first and pass its output"
            )
        from robolake.loaders.lake_stream import LakeStream

        try:
            lake_source = source if isinstance(source, Lake) else Lake.open(source, storage_options=storage_options)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{source} is neither a pack output (no {MANIFEST_NAME}) nor a lake ({e}); pass the directory "
                "`robolake pack` wrote or one `robolake ingest` wrote"
            ) from e
        lake_stream = LakeStream(lake_source, spec, config)
        lake_stream.set_epoch(epoch)
        return iter(lake_stream)
    if spec is not None:
        raise ValueError(f"{source} holds packed shards, whose packing is fixed; drop `spec` (or stream from the lake)")
    if backend == "ray":
        from robolake.loaders.ray_stream import RayPackedStream

        ray_stream = RayPackedStream(source, config, lake=lake, storage_options=storage_options)
        ray_stream.set_epoch(epoch)
        return iter(ray_stream)
    from robolake.loaders.shards import PackedLoader

    loader = PackedLoader(source, config, lake=lake, storage_options=storage_options)
    loader.set_epoch(epoch)
    return iter(loader)
