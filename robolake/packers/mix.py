"""Weighted mixtures: which samples one epoch packs when sources are weighted.

A team training one policy on many robots never trains on its data as it comes: a mixture says
what share of an epoch each embodiment, task, source (recorded demos, rollouts) or tagged subset
contributes, e.g. `embodiment=gr1:0.5,so101:0.3,*:0.2` (`*` is every episode no other entry
names). A share is of *samples* (the default: the usual per-dataset sampling weight) or of
*tokens* (what the backbone computes on; a three-camera embodiment costs three times a
one-camera one per sample). `MixSpec` is the typed mixture; `bind_mixture` ties it to one sample
index (the component of every episode, each component's quota per epoch), and `Mixture.draw` is
the step that `pack` and the lake stream both run before packing (`pipeline.epoch_samples`).

How an epoch is drawn. Each component has a quota: its weight times the epoch size (by default
the size of everything the mixture matched, so weights equal to the natural shares reproduce
unweighted packing exactly). Its samples are laid out as an endless stream of permutations
(cycle k is a fresh seeded permutation of the component), and epoch e takes the stretch of that
stream from e x quota to (e + 1) x quota. So a component smaller than its share is repeated, each
repeat in another order; a larger one is subsampled without replacement, and the next epoch
continues where this one stopped, so every sample is seen before any is seen twice. With a token
share the stream is measured in tokens (a sample is taken when it starts inside the stretch), so
a component misses its quota by less than one sample. Quotas of samples are rounded by largest
remainder, so they sum to the epoch size exactly. Everything is a function of (seed, epoch): the
same spec, lake version and seed give the same samples, and a resumed run replans the epoch.

Ranks. The draw is global and packed before the sequences are dealt to ranks, so every rank
reads part of one mixture. Packed sequences are homogeneous (best-fit groups equal lengths,
and lengths follow the embodiment), so a random deal leaves each rank's share off by the noise
of its few hundred sequences; both the lake stream and the shard loader deal them stratified
instead (`Mixture.strata`, dealt by `loaders/order.py` and `loaders/deal.py`), the shard loader from
the stratum of every row that a mixed pack records in its manifest (`mixture["row_strata"]`).
`robolake bench mix` measures the per-rank shares both ways. Large
packs plan per range of episodes (`pipeline.plan_ranges`); `Mixture.restrict` gives a range the
part of each global quota in proportion to the component's samples (or tokens) in that range,
so the global shares hold without a global sample array on the driver.

What it trades. A packed sequence may hold two copies of an upsampled sample (the draw is
shuffled with everything else before packing); samples longer than `max_tokens` are left out of
the pools before drawing (`reject`) rather than drawn and dropped, which would skew the shares.
An episode belongs to one component: the first listed that names it (tags may overlap).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robolake.lake import Lake
from robolake.packers.samples import SampleIndex

__all__ = ["MIX_KEYS", "SHARES", "MixSpec", "Mixture", "bind_mixture", "load_mix", "row_strata"]

from robolake.packers.mixspec import MAX_EPOCH_SAMPLES, MIX_KEYS, REST, SHARES, MixSpec, load_mix

# --- binding a mixture to a sample index -----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Mixture:
    """A MixSpec bound to one sample index (picklable: Ray planning tasks get it).

    Attributes:
        spec: The mixture.
        labels: int64 [episodes of the index] component of each episode, -1 when left out.
        quotas: float64 [components] samples (or tokens) each component contributes per epoch.
        cycle: int64 [components] packable samples (or tokens) of each component: one cycle of
            its stream.
        stream: Offsets the seeds of this mixture's streams (planning ranges each get their own).
    """

    spec: MixSpec
    labels: np.ndarray
    quotas: np.ndarray
    cycle: np.ndarray
    stream: int = 0

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.spec.weights)

    def _units(self, index: SampleIndex, ids: np.ndarray) -> np.ndarray:
        return index.length_of(ids) if self.spec.share == "tokens" else np.ones(len(ids), dtype=np.int64)

    def draw(self, index: SampleIndex, samples: np.ndarray, *, seed: int, epoch: int = 0) -> np.ndarray:
        """The sample ids epoch `epoch` packs (repeats allowed), component after component.

        Args:
            index: The sample index the mixture was bound to.
            samples: The pool: every packable sample id (the caller leaves out oversize ones).
            seed: Seed of the permutations (the pack spec's).
            epoch: Which epoch (consecutive epochs continue each component's stream).

        Raises:
            ValueError: a component with a positive quota has no packable sample.
        """
        samples = np.asarray(samples, dtype=np.int64)
        comp = self.labels[index.episode_of(samples)]
        order = np.argsort(comp, kind="stable")
        bounds = np.searchsorted(comp[order], np.arange(len(self.values) + 1))
        out: list[np.ndarray] = []
        for c in range(len(self.values)):
            pool = samples[order[bounds[c] : bounds[c + 1]]]
            quota = float(self.quotas[c])
            if quota <= 0:
                continue
            if pool.size == 0:
                raise ValueError(
                    f"mixture component {self.spec.key}={self.values[c]} has weight > 0 but no sample that fits "
                    "max_tokens; raise max_tokens, give it weight 0, or leave it out of the mixture"
                )
            out.append(self._take(pool, self._units(index, pool), c, quota, seed, epoch))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def _take(self, pool: np.ndarray, units: np.ndarray, c: int, quota: float, seed: int, epoch: int) -> np.ndarray:
        """Samples starting inside [epoch * quota, (epoch + 1) * quota) of component c's stream."""
        per_cycle = int(units.sum())
        start, end = epoch * quota, (epoch + 1) * quota
        taken: list[np.ndarray] = []
        k = int(start // per_cycle)
        while k * per_cycle < end:
            perm = np.random.default_rng([seed, 0x4D4958, self.stream, c, k]).permutation(pool.size)
            begins = k * per_cycle + np.concatenate([[0], np.cumsum(units[perm])[:-1]])
            taken.append(pool[perm[(begins >= start) & (begins < end)]])
            k += 1
        return np.concatenate(taken)

    def split(self, index: SampleIndex, ranges: Sequence[np.ndarray], max_tokens: int) -> list[Mixture]:
        """This mixture for each planning range (`ranges`: episode rows): every quota shared out
        in proportion to the component's packable samples (tokens) in each range, by largest
        remainder for sample shares, so the ranges together draw the global quotas."""
        units = _episode_units(index, self.spec.share, max_tokens)
        k = len(self.values)
        per = np.stack([_bincount(self.labels[r], units[r], k) for r in ranges])  # [ranges, components]
        part = np.divide(per, self.cycle, out=np.zeros(per.shape), where=self.cycle > 0) * self.quotas
        if self.spec.share == "samples":
            part = np.stack([_largest_remainder(part[:, c]) for c in range(k)], axis=1)
        return [
            Mixture(spec=self.spec, labels=self.labels, quotas=part[r], cycle=per[r], stream=r + 1)
            for r in range(len(ranges))
        ]

    def strata(self, index: SampleIndex, bins: Sequence[np.ndarray], max_tokens: int) -> np.ndarray:
        """int64 [sequences] stratum of each packed sequence, for the loaders' stratified deal
        (`loaders/order.py`): its dominant group, then (descending) that group's share of its
        samples, then its fill, each in 1/256ths: sorting by it lays out sequences of nearly the
        same make-up side by side."""
        n = len(bins)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        sizes = np.fromiter((len(b) for b in bins), dtype=np.int64, count=n)
        flat = np.concatenate(list(bins))
        comp = self.labels[index.episode_of(flat)]
        k = len(self.values) + 1  # + one slot for samples of no group
        owner = np.repeat(np.arange(n), sizes)
        counts = np.bincount(owner * k + np.where(comp < 0, k - 1, comp), minlength=n * k).reshape(n, k)
        share = np.rint(255 * counts.max(axis=1) / np.maximum(sizes, 1)).astype(np.int64)
        fill = np.minimum(
            255, 256 * np.bincount(owner, weights=index.length_of(flat), minlength=n) // max(1, max_tokens)
        ).astype(np.int64)
        return (counts.argmax(axis=1) * 256 + (255 - share)) * 256 + fill

    def counts(self, index: SampleIndex, drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(samples, tokens) of `drawn` in each component."""
        drawn = np.asarray(drawn, dtype=np.int64)
        comp = self.labels[index.episode_of(drawn)]
        keep = comp >= 0
        n = np.bincount(comp[keep], minlength=len(self.values)).astype(np.int64)
        return n, _bincount(comp[keep], index.length_of(drawn[keep]), len(self.values))

    def report(self, samples: np.ndarray, tokens: np.ndarray) -> dict[str, Any]:
        """What one epoch holds per component (from `counts`): the manifest's `mixture` record.

        Realised shares are in the mixture's unit; `max_abs_error` is the largest
        |realised - target| share.
        """
        got = np.asarray(tokens if self.spec.share == "tokens" else samples, dtype=np.float64)
        realised = got / max(1.0, float(got.sum()))
        targets = np.asarray([w for _, w in self.spec.normalized])
        components = [
            {
                "value": v,
                "weight": float(w),
                "target_share": float(targets[c]),
                "realised_share": float(realised[c]),
                "quota": float(self.quotas[c]),
                "pool": int(self.cycle[c]),
                "drawn_samples": int(samples[c]),
                "drawn_tokens": int(tokens[c]),
                "repeats": float(self.quotas[c] / self.cycle[c]) if self.cycle[c] else 0.0,
            }
            for c, (v, w) in enumerate(self.spec.weights)
        ]
        return {
            **self.spec.to_json(),
            "unit": self.spec.share,
            "components": components,
            "left_out_episodes": int((self.labels < 0).sum()),
            "max_abs_error": float(np.abs(realised - targets).max()),
        }


def row_strata(mixture: Mapping[str, Any] | None) -> np.ndarray | None:
    """The per-row strata a mixed pack recorded in its manifest (`mixture["row_strata"]`), or None."""
    if not mixture or "row_strata" not in mixture:
        return None
    return np.asarray(mixture["row_strata"], dtype=np.int64)


def bind_mixture(lake: Lake, index: SampleIndex, mix: MixSpec, *, max_tokens: int) -> Mixture:
    """Bind `mix` to `index`: the component of every episode and each component's epoch quota.

    Args:
        lake: The lake the index was built from (source and tag membership are read from it).
        index: The sample index.
        mix: The mixture.
        max_tokens: Samples longer than this are not in any pool (they cannot be packed).

    Raises:
        ValueError: a value names no episode of the selection (the message lists what there
            is), or the mixture matches nothing packable.
    """
    labels = _labels(lake, index, mix)
    cycle = _bincount(labels, _episode_units(index, mix.share, max_tokens), len(mix.weights))
    weights = np.asarray([w for _, w in mix.normalized])
    size = mix.epoch_size if mix.epoch_size is not None else int(cycle[weights > 0].sum())
    if size <= 0:
        raise ValueError(
            f"the mixture {mix.to_text()} matches no sample of lake {lake.uri} (version {lake.version}) that fits "
            f"max_tokens={max_tokens}"
        )
    shortest = int(index.episode_length[index.episode_length <= max_tokens].min(initial=max_tokens))
    drawn = size if mix.share == "samples" else size / max(1, shortest)
    if drawn > MAX_EPOCH_SAMPLES:
        raise ValueError(
            f"the mixture's epoch of {size:,} {mix.share} would draw about {drawn:,.0f} samples, more than robolake "
            f"plans in one epoch ({MAX_EPOCH_SAMPLES:,}); give a smaller epoch_size"
        )
    quotas = _largest_remainder(weights * size) if mix.share == "samples" else weights * size
    return Mixture(spec=mix, labels=labels, quotas=np.asarray(quotas, dtype=np.float64), cycle=cycle)


def _episode_units(index: SampleIndex, share: str, max_tokens: int) -> np.ndarray:
    """Packable samples (or their tokens) of each episode: every sample of an episode has one length."""
    counts = np.diff(index.sample_start)
    fits = index.episode_length <= max_tokens
    return (counts * (index.episode_length if share == "tokens" else 1) * fits).astype(np.int64)


def _bincount(labels: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    keep = labels >= 0
    return np.bincount(labels[keep], weights=np.asarray(weights)[keep], minlength=k).round().astype(np.int64)


def _largest_remainder(exact: np.ndarray) -> np.ndarray:
    """Integers summing to round(sum(exact)), each the floor or ceiling of its entry."""
    exact = np.asarray(exact, dtype=np.float64)
    base = np.floor(exact)
    short = int(round(exact.sum() - base.sum()))
    if short > 0:
        base[np.argsort(-(exact - base), kind="stable")[:short]] += 1
    return base


def _labels(lake: Lake, index: SampleIndex, mix: MixSpec) -> np.ndarray:
    """Component of each episode of `index` (-1: left out); checks every value names something."""
    eps = index.episodes
    ids = eps["episode_id"].to_pylist()
    values = [v for v, _ in mix.weights]
    members: list[set[str] | None] = []  # None = the rest
    selection = set(ids)
    for v in values:
        if v == REST:
            members.append(None)
        elif mix.key in ("tag", "split"):
            members.append(_tag_members(lake, f"split:{v}" if mix.key == "split" else v, selection))
        else:
            if mix.key == "source":  # the `--where` rule for `source` (metadata's, 'recorded' when absent)
                from robolake.lake import select_episode_ids

                hit = set(select_episode_ids(lake, f"source = {v!r}")) & selection
            else:
                hit = {e for e, x in zip(ids, eps[mix.key].to_pylist(), strict=True) if x == v}
            if not hit:
                have = sorted(
                    {_meta_source(m) for m in lake.episodes(columns=["metadata"])["metadata"].to_pylist()}
                    if mix.key == "source"
                    else set(eps[mix.key].to_pylist())
                )
                raise ValueError(
                    f"mixture {mix.key}={v} names no episode of lake {lake.uri} (version {lake.version}"
                    f"{'' if lake.tag is None else ', tag ' + lake.tag.name}); its {mix.key} values are {have[:20]}"
                    f"{' ...' if len(have) > 20 else ''}"
                )
            members.append(hit)
    labels = np.full(len(ids), -1, dtype=np.int64)
    claimed = np.zeros(len(ids), dtype=bool)
    rest = None
    for c, m in enumerate(members):
        if m is None:
            rest = c
            continue
        mask = np.fromiter((e in m for e in ids), dtype=bool, count=len(ids)) & ~claimed
        labels[mask] = c
        claimed |= mask
    if rest is not None:
        labels[~claimed] = rest
    return labels


def _meta_source(text: str | None) -> str:
    try:
        d = json.loads(text) if text else {}
    except json.JSONDecodeError:
        d = {}
    return str(d.get("source", "recorded")) if isinstance(d, dict) else "recorded"


def _tag_members(lake: Lake, name: str, selection: set[str]) -> set[str]:
    from robolake.lake import Lake as LakeHandle
    from robolake.lake import read_tag

    try:
        tag = read_tag(lake.uri, name, lake.storage_options)
    except KeyError as e:
        raise ValueError(
            f"mixture names a tag the lake does not have: {e.args[0]}; `robolake tag {lake.uri} --list` lists them"
        ) from None
    keep = (
        set(tag.episodes)
        if tag.episodes is not None
        else set(LakeHandle.open(lake.uri, version=tag.version, storage_options=lake.storage_options).episode_ids())
    )
    hit = keep & selection
    if not hit:
        raise ValueError(
            f"mixture tag {name!r} keeps no episode of this selection of lake {lake.uri} (version {lake.version})"
        )
    return hit
