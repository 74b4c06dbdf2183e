"""PackedBatch: the only thing the trainer sees (the batch contract of DESIGN.md).

It lives beside the schemas and needs only torch and numpy, so the model and trainer never import
the data-loading stack (lance, PyAV, fsspec, ray).


A packed batch holds n samples laid end to end on one token axis. Sample i's backbone tokens are
its camera views (`tokens_per_view` tokens each, in view order), its text tokens, then its
stream-history tokens (one per recorded message in its window, `packers/history.py`; none unless
packed with `--history`), so its length is `views_i * tokens_per_view + text_len_i + history_i`
and `cu_seqlens` follows from those counts. The
action head works on its own token axis (state token, future tokens, H action tokens per sample)
and cross-attends to the backbone through `cu_seqlens_q` / `cu_seqlens_k`.

`to_padded()` lays the same samples out padded to the longest one, so packed and padded training
can be compared on identical inputs.

Every batch source (`BatchSource`) reports where it is as one `LoaderState`, the same fields for
every source, in plain JSON types (a checkpoint stores it as JSON). Loading a state is strict:
a state from other data (source URI, version, pack spec), another loader or another seed, shuffle
or drop_last is refused with a ValueError that names the key, and a state with a missing or
unknown key is refused as well. The position in an epoch is world-size free (`position`: the
sequences of the epoch's canonical order, `loaders/order.py`, that all ranks together have
consumed), so a state resumes on any world size, rank, worker count and batch size; a state
written before positions were recorded resumes only at an epoch boundary, as it did then.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robolake.schemas.varlen import cu_seqlens_from_lengths, position_ids_from_lengths

__all__ = ["BatchLayout", "BatchSource", "LoaderState", "PackedBatch", "PaddedBatch", "make_packed_batch"]


@dataclass(frozen=True, kw_only=True)
class PackedBatch:
    """n samples packed on one token axis.

    Attributes:
        cu_seqlens: int32 [n+1] backbone token boundaries (views then text, per sample).
        max_seqlen: Longest sample's backbone token count.
        position_ids: int64 [total_tokens], restarting at 0 for each sample.
        tokens_per_view: Backbone tokens one camera view becomes.
        pixels: uint8 [num_views, 3, H, W], all views of all samples in sample order.
        view_sample_index: int64 [num_views], the sample each view belongs to (non-decreasing).
        text_ids: int64 [total_text_tokens], byte-level token ids of all instructions.
        cu_text: int32 [n+1] boundaries of each sample's text in `text_ids`.
        state: float32 [n, max_state_dim], normalised, zero beyond the embodiment's width.
        state_mask: bool [n, max_state_dim], True on real state dims.
        action: float32 [n, H, max_action_dim], normalised action chunk.
        action_mask: bool [n, H, max_action_dim], True on real dims of steps inside the episode.
        embodiment_id: int64 [n].
        sample_keys: (episode_id, step_index) per sample, for tracing a batch back to the lake.
        history_values: float32 [total_history, width], normalised values of each history token.
        history_dt: float32 [total_history], seconds of each token's message before its sample (<= 0).
        history_stream: int64 [total_history], the history stream id of each token.
        cu_history: int32 [n+1] boundaries of each sample's history tokens.
    """

    cu_seqlens: torch.Tensor
    max_seqlen: int
    position_ids: torch.Tensor
    tokens_per_view: int
    pixels: torch.Tensor
    view_sample_index: torch.Tensor
    text_ids: torch.Tensor
    cu_text: torch.Tensor
    state: torch.Tensor
    state_mask: torch.Tensor
    action: torch.Tensor
    action_mask: torch.Tensor
    embodiment_id: torch.Tensor
    sample_keys: tuple[tuple[str, int], ...] = ()
    history_values: torch.Tensor | None = None
    history_dt: torch.Tensor | None = None
    history_stream: torch.Tensor | None = None
    cu_history: torch.Tensor | None = None

    @property
    def num_samples(self) -> int:
        return int(self.cu_seqlens.shape[0]) - 1

    @property
    def total_tokens(self) -> int:
        return int(self.cu_seqlens[-1])

    @property
    def seqlens(self) -> torch.Tensor:
        """int64 [n] backbone tokens per sample."""
        return (self.cu_seqlens[1:] - self.cu_seqlens[:-1]).long()

    @property
    def views_per_sample(self) -> torch.Tensor:
        """int64 [n] number of camera views of each sample."""
        return torch.bincount(self.view_sample_index, minlength=self.num_samples)

    @property
    def text_lengths(self) -> torch.Tensor:
        return (self.cu_text[1:] - self.cu_text[:-1]).long()

    @property
    def history_lengths(self) -> torch.Tensor:
        """int64 [n] stream-history tokens of each sample (zeros without history)."""
        if self.cu_history is None:
            return torch.zeros(self.num_samples, dtype=torch.long, device=self.cu_seqlens.device)
        return (self.cu_history[1:] - self.cu_history[:-1]).long()

    def _map(self, fn: Any) -> PackedBatch:
        changes = {
            f.name: fn(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return dataclasses.replace(self, **changes)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PackedBatch:
        """A copy with every tensor on `device`."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> PackedBatch:
        """A copy with every tensor in pinned host memory (DataLoader calls this with pin_memory=True)."""
        return self._map(lambda t: t.pin_memory())

    def to_padded(self) -> PaddedBatch:
        """The same samples padded to the longest sample (for packed-vs-padded comparisons)."""
        lengths = self.seqlens
        max_len = self.max_seqlen
        starts = self.cu_seqlens[:-1].long()
        offs = torch.arange(max_len, device=self.cu_seqlens.device)
        token_index = starts[:, None] + offs[None, :]
        valid = offs[None, :] < lengths[:, None]
        token_index = torch.where(valid, token_index, torch.zeros_like(token_index))
        return PaddedBatch(packed=self, token_index=token_index, key_padding_mask=valid)


@dataclass(frozen=True, kw_only=True)
class PaddedBatch:
    """The samples of `packed`, laid out [n, max_seqlen] with padding.

    Attributes:
        packed: The packed batch holding the data.
        token_index: int64 [n, max_seqlen], the packed token each padded slot reads (0 on padding).
        key_padding_mask: bool [n, max_seqlen], True on real tokens.
    """

    packed: PackedBatch
    token_index: torch.Tensor
    key_padding_mask: torch.Tensor

    @property
    def padding_fraction(self) -> float:
        """Fraction of the padded token grid that is padding."""
        return 1.0 - float(self.key_padding_mask.float().mean()) if self.key_padding_mask.numel() else 0.0

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PaddedBatch:
        return PaddedBatch(
            packed=self.packed.to(device, non_blocking),
            token_index=self.token_index.to(device, non_blocking=non_blocking),
            key_padding_mask=self.key_padding_mask.to(device, non_blocking=non_blocking),
        )


def make_packed_batch(
    *,
    pixels: np.ndarray | torch.Tensor,
    views_per_sample: np.ndarray | list[int],
    text_ids: list[np.ndarray],
    state: list[np.ndarray],
    action: list[np.ndarray],
    action_valid_steps: np.ndarray | list[int],
    embodiment_id: np.ndarray | list[int],
    tokens_per_view: int,
    max_state_dim: int,
    max_action_dim: int,
    sample_keys: tuple[tuple[str, int], ...] = (),
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
    history_width: int = 0,
) -> PackedBatch:
    """Assemble a PackedBatch from per-sample pieces; the one builder loaders and tests share.

    Args:
        pixels: uint8 [num_views, 3, H, W] (or [num_views, H, W, 3]), views of all samples in order.
        views_per_sample: Views of each sample (sum = num_views).
        text_ids: Per sample, the instruction's token ids.
        state: Per sample, the normalised state vector (its embodiment's width).
        action: Per sample, the normalised action chunk [H, action width].
        action_valid_steps: Per sample, how many of the H steps lie inside the episode.
        embodiment_id: Per sample, the embodiment's integer id.
        tokens_per_view: Backbone tokens per view.
        max_state_dim: Width to pad state to.
        max_action_dim: Width to pad actions to.
        sample_keys: (episode_id, step) per sample.
        history: Per sample, (values [k, history_width], dt [k], stream ids [k]) of its
            stream-history tokens; None: no history.
        history_width: Values per history token.

    Raises:
        ValueError: the pieces disagree in count or a vector is wider than the padded width.
    """
    n = len(text_ids)
    views = np.asarray(views_per_sample, dtype=np.int64)
    if not (len(views) == len(state) == len(action) == len(action_valid_steps) == len(embodiment_id) == n):
        raise ValueError(
            f"per-sample inputs disagree in count: views={len(views)} text={n} state={len(state)} "
            f"action={len(action)} valid={len(action_valid_steps)} embodiment={len(embodiment_id)}"
        )
    if isinstance(pixels, np.ndarray) and pixels.ndim == 4 and pixels.shape[-1] == 3 and pixels.shape[1] != 3:
        # NHWC -> NCHW: numpy's strided copy costs half of torch's permute().contiguous() here
        pixels = np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))
    px = torch.as_tensor(pixels)
    if px.ndim != 4:
        raise ValueError(f"pixels must be [views, 3, H, W], got shape {tuple(px.shape)}")
    if px.shape[-1] == 3 and px.shape[1] != 3:
        px = px.permute(0, 3, 1, 2)
    if px.shape[0] != int(views.sum()):
        raise ValueError(f"pixels hold {px.shape[0]} views but views_per_sample sums to {int(views.sum())}")
    horizon = int(action[0].shape[0]) if n else 0
    text_lengths = np.array([len(t) for t in text_ids], dtype=np.int64)
    hist_lengths = np.array([len(h[1]) for h in history], dtype=np.int64) if history is not None else None
    if hist_lengths is not None and len(hist_lengths) != n:
        raise ValueError(f"history holds {len(hist_lengths)} samples, the batch {n}")
    lengths = views * tokens_per_view + text_lengths + (hist_lengths if hist_lengths is not None else 0)

    state_t = torch.zeros(n, max_state_dim, dtype=torch.float32)
    state_m = torch.zeros(n, max_state_dim, dtype=torch.bool)
    action_t = torch.zeros(n, horizon, max_action_dim, dtype=torch.float32)
    action_m = torch.zeros(n, horizon, max_action_dim, dtype=torch.bool)
    for i in range(n):
        s = np.asarray(state[i], dtype=np.float32)
        a = np.asarray(action[i], dtype=np.float32)
        if s.shape[0] > max_state_dim or a.shape[-1] > max_action_dim or a.shape[0] != horizon:
            raise ValueError(
                f"sample {i}: state width {s.shape[0]} (max {max_state_dim}) or action chunk "
                f"{a.shape} (want [{horizon}, <= {max_action_dim}]) does not fit"
            )
        state_t[i, : s.shape[0]] = torch.from_numpy(s)
        state_m[i, : s.shape[0]] = True
        action_t[i, :, : a.shape[1]] = torch.from_numpy(a)
        action_m[i, : int(action_valid_steps[i]), : a.shape[1]] = True

    cu = torch.from_numpy(cu_seqlens_from_lengths(lengths))
    max_len = int(lengths.max(initial=0))
    return PackedBatch(
        cu_seqlens=cu,
        max_seqlen=max_len,
        position_ids=torch.from_numpy(position_ids_from_lengths(lengths)),
        tokens_per_view=tokens_per_view,
        pixels=px.contiguous(),
        view_sample_index=torch.repeat_interleave(torch.arange(n), torch.from_numpy(views)),
        text_ids=torch.from_numpy(np.concatenate(text_ids).astype(np.int64))
        if n
        else torch.zeros(0, dtype=torch.int64),
        cu_text=torch.from_numpy(cu_seqlens_from_lengths(text_lengths)),
        state=state_t,
        state_mask=state_m,
        action=action_t,
        action_mask=action_m,
        embodiment_id=torch.as_tensor(np.asarray(embodiment_id), dtype=torch.int64),
        sample_keys=tuple(sample_keys),
        **(_history_tensors(history, history_width) if history is not None else {}),
    )


def _history_tensors(history: list[tuple[np.ndarray, np.ndarray, np.ndarray]], width: int) -> dict[str, torch.Tensor]:
    lengths = np.array([len(h[1]) for h in history], dtype=np.int64)
    total = int(lengths.sum())
    values = (
        np.concatenate([np.asarray(h[0], np.float32).reshape(-1, width) for h in history])
        if total
        else np.zeros((0, width), np.float32)
    )
    dt = np.concatenate([np.asarray(h[1], np.float32) for h in history]) if total else np.zeros(0, np.float32)
    ids = np.concatenate([np.asarray(h[2], np.int64) for h in history]) if total else np.zeros(0, np.int64)
    return {
        "history_values": torch.from_numpy(np.ascontiguousarray(values)),
        "history_dt": torch.from_numpy(dt),
        "history_stream": torch.from_numpy(ids),
        "cu_history": torch.from_numpy(cu_seqlens_from_lengths(lengths)),
    }


@dataclass(frozen=True, kw_only=True)
class BatchLayout:
    """What a batch source's batches look like, so a model can be sized to them before training.

    Attributes:
        tokens_per_view: Backbone tokens one camera view becomes.
        horizon: Action chunk length H.
        max_state_dim: Width state is padded to.
        max_action_dim: Width actions are padded to.
        num_embodiments: Embodiment ids are in [0, num_embodiments).
        max_seqlen: Capacity of one packed sequence (backbone tokens).
        embodiments: Embodiment tag of each id.
        history_streams: Stream-history streams (ids in [0, history_streams)); 0 without history.
        history_width: Values per history token.
    """

    tokens_per_view: int
    horizon: int
    max_state_dim: int
    max_action_dim: int
    num_embodiments: int
    max_seqlen: int
    embodiments: tuple[str, ...] = ()
    history_streams: int = 0
    history_width: int = 0


# What makes two states the same run's: a state differing in one of these would repeat or skip samples.
IDENTITY = ("loader", "source", "version", "spec", "seed", "shuffle", "drop_last")
# The keys of a state written before positions were recorded (it resumes at an epoch boundary only).
LEGACY_KEYS = frozenset(
    (*IDENTITY, "sequences_per_batch", "rank", "world_size", "epoch", "batches_done", "num_batches")
)


@dataclass(frozen=True, kw_only=True)
class LoaderState:
    """Where one rank's batch source is: what every `BatchSource.state_dict()` returns, as JSON.

    Attributes:
        loader: The source that wrote it: "torch" (`PackedLoader`), "ray" (`RayPackedStream`)
            or "lake" (`LakeStream`).
        source: URI of the data read: the pack output, or the lake.
        version: Lance version of the packed shards (the manifest's `shards_version`), or the
            lake version streamed.
        spec: `LoaderState.digest` of the pack spec's JSON (`PackSpec.to_json()`).
        seed: `LoaderConfig.seed`.
        shuffle: `LoaderConfig.shuffle`.
        drop_last: `LoaderConfig.drop_last`.
        sequences_per_batch: `LoaderConfig.sequences_per_batch`.
        rank: The data-parallel rank that saved it.
        world_size: Number of data-parallel ranks when it was saved.
        epoch: The epoch the source is in.
        batches_done: Batches of `epoch` this rank has taken since `anchor` (the next one is read
            next).
        num_batches: Batches of `epoch` from `anchor` on, on every rank; `batches_done ==
            num_batches` means the epoch was read to the end.
        position: Sequences of `epoch`'s canonical order consumed by all ranks together after
            this rank's `batches_done` batches (the next step reads from here).
        anchor: Position at which this world's plan of `epoch` began: 0, or where the run
            resumed on another world size or batch size.
        sequences: Packed sequences in `epoch` (a check that the data is the same).
    """

    loader: str
    source: str
    version: int
    spec: str
    seed: int
    shuffle: bool
    drop_last: bool
    sequences_per_batch: int
    rank: int
    world_size: int
    epoch: int
    batches_done: int
    num_batches: int
    position: int
    anchor: int
    sequences: int

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            want = {"str": str, "bool": bool, "int": int}[str(f.type)]
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise ValueError(
                    f"loader state field {f.name!r} must be {f.type}, got {value!r}; pass a state from state_dict()"
                )
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"loader state has rank={self.rank} outside [0, world_size={self.world_size})")
        if not 0 <= self.batches_done <= self.num_batches or self.epoch < 0:
            raise ValueError(
                f"loader state has epoch={self.epoch}, batches_done={self.batches_done} of num_batches="
                f"{self.num_batches}; pass a state from state_dict()"
            )
        if not 0 <= self.anchor <= self.position <= self.sequences:
            raise ValueError(
                f"loader state has anchor={self.anchor}, position={self.position} outside the epoch's "
                f"{self.sequences} sequences; pass a state from state_dict()"
            )

    @staticmethod
    def digest(spec_json: Mapping[str, Any]) -> str:
        """sha256 (hex) of a JSON-able description, independent of key order."""
        return hashlib.sha256(json.dumps(spec_json, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def finished(self) -> bool:
        """The epoch was read to the end (the next batch is the next epoch's first)."""
        return self.num_batches > 0 and self.batches_done == self.num_batches

    def to_json(self) -> dict[str, Any]:
        """The state as a dict of str, int and bool (what `state_dict()` returns)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> LoaderState:
        """The inverse of `to_json`.

        Raises:
            ValueError: not a mapping, a key is missing or unknown, or a value has the wrong type.
        """
        if not isinstance(state, Mapping):
            raise ValueError(
                f"a loader state is a JSON object from state_dict(), got {type(state).__name__}; pass the dict itself"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in names if k not in state]
        unknown = sorted(set(state) - set(names))
        if missing or unknown:
            raise ValueError(
                f"loader state is missing {missing} / has unknown keys {unknown}: it was not written by "
                "BatchSource.state_dict() of this robolake version; start the run's data over with set_epoch()"
            )
        return cls(**{k: state[k] for k in names})

    def resume_from(self, saved: Mapping[str, Any]) -> tuple[int, int, int | None]:
        """(epoch, position, anchor) a source in state `self` continues from to pick up `saved`.

        `self` is the loading source's own state; `saved` may come from any rank of any world
        size, or from `loaders.merge_states`. A finished epoch continues at the next one's start.
        The anchor is the saved plan's where the world size and batch size are the same (the rest
        of the epoch is split as the uninterrupted run would have), else None (plan from the
        position).

        Raises:
            ValueError: `saved` is malformed, comes from another loader, data, spec or seed, or
                (written before positions were recorded) another world size mid-epoch.
        """
        if isinstance(saved, Mapping) and set(saved) == LEGACY_KEYS:
            return self._resume_legacy(saved)
        old = LoaderState.from_json(saved)
        self._check_identity(saved)
        if old.finished:
            return old.epoch + 1, 0, 0
        same_world = (old.world_size, old.sequences_per_batch) == (self.world_size, self.sequences_per_batch)
        return old.epoch, old.position, old.anchor if same_world else None

    def _check_identity(self, saved: Mapping[str, Any]) -> None:
        for key in IDENTITY:
            if saved[key] != getattr(self, key):
                raise ValueError(
                    f"loader state has {key}={saved[key]!r} but this loader has {getattr(self, key)!r}: it comes from "
                    f"another dataset, pack spec or loader config, and resuming would repeat or skip samples; open the "
                    f"{self.loader} source on the same data ({saved['source']} version {saved['version']}), spec and "
                    "seed, or start over without the loader state (set_epoch())"
                )

    def _resume_legacy(self, saved: Mapping[str, Any]) -> tuple[int, int, int | None]:
        """A state written before positions were recorded: its split of the epoch is not this
        one's, so it resumes at an epoch boundary only."""
        for key in LEGACY_KEYS:
            value, want = saved[key], type(getattr(self, key))
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise ValueError(f"loader state field {key!r} must be {want.__name__}, got {value!r}")
        self._check_identity(saved)
        epoch, done, total = saved["epoch"], saved["batches_done"], saved["num_batches"]
        if total and done == total:
            return epoch + 1, 0, 0
        if done:
            raise ValueError(
                f"loader state (epoch {epoch}, batch {done}) was written by an older robolake that did not record the "
                "epoch position, and its split of the epoch is not this one's: resume from a checkpoint taken at an "
                f"epoch boundary, or restart the epoch with set_epoch({epoch})"
            )
        return epoch, 0, 0


class BatchSource(abc.ABC):
    """The one contract every batch source implements (torch shard loader, lake stream, Ray Data).

    Iterating yields one epoch of this rank's batches, from where the source stopped; when an
    epoch was read to the end, the next iteration starts the next epoch. `state_dict` /
    `load_state_dict` resume mid-epoch (or raise where a source cannot). Sources are opened for
    one data-parallel rank (`rank` of `world_size`) and never read another rank's samples.

    Attributes:
        rank: This process's data-parallel rank.
        world_size: Number of data-parallel ranks.
        epoch: The epoch the source is in (the one the last batch came from).
    """

    rank: int
    world_size: int
    epoch: int

    @abc.abstractmethod
    def __iter__(self) -> Iterator[PackedBatch]: ...

    @abc.abstractmethod
    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its first batch at the next iteration."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Where this rank is (`LoaderState.to_json()`); `load_state_dict` of a source over the same data
        continues from it."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state` (see `LoaderState.resume_from`); raises ValueError where that would repeat or
        skip samples."""

    @property
    @abc.abstractmethod
    def num_batches(self) -> int | None:
        """Batches per epoch on this rank (the same on every rank), or None where it is not known up front."""

    @property
    @abc.abstractmethod
    def layout(self) -> BatchLayout:
        """The shape of the batches (to size a model to the data)."""
