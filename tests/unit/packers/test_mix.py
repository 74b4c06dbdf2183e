"""Weighted mixtures: the spec, the draw (shares, repeats, subsamples, epochs), pack and the lake stream."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import numpy as np
import pytest

from robolake.bench.mix import build_mixed_lake
from robolake.lake import Lake
from robolake.lake.protocol.tags import create_tag
from robolake.loaders import LakeStream, LoaderConfig, open_batches
from robolake.packers import (
    PackSpec,
    TokenLengthConfig,
    build_sample_index,
    pack,
    plan_sequences,
    read_manifest,
)
from robolake.packers.mix import MixSpec, load_mix
from robolake.packers.pipeline import epoch_samples, mixture_for, window_sequences

TOKENS = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
MIX = "embodiment=gr1:0.5,so101:0.3,*:0.2"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return Lake.open(build_mixed_lake(str(tmp_path_factory.mktemp("mix") / "lake"), 4000, mean_steps=30))


def _spec(mix: str | None = MIX, share: str = "samples", **kw) -> PackSpec:
    return PackSpec(max_tokens=512, tokens=TOKENS, mix=None if mix is None else MixSpec.parse(mix, share=share), **kw)


def _component_share(lake: Lake, index, ids: np.ndarray, key: str, unit: str = "samples") -> dict[str, float]:
    eps = (
        index.episodes[key].to_pylist()
        if key != "source"
        else [
            json.loads(m).get("source", "recorded")
            for m in lake.episodes(columns=["episode_id", "metadata"]).sort_by("episode_id")["metadata"].to_pylist()
        ]
    )
    ep = index.episode_of(ids)
    w = index.length_of(ids) if unit == "tokens" else np.ones(len(ids))
    out: Counter[str] = Counter()
    for e, x in zip(ep.tolist(), w.tolist(), strict=True):
        out[eps[e]] += x
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


# --- the spec ----------------------------------------------------------------------------------


def test_parse_and_round_trip(tmp_path):
    m = MixSpec.parse("embodiment = gr1:0.5, so101:0.3 ,*:0.2", share="tokens")
    assert m.key == "embodiment" and m.weights == (("gr1", 0.5), ("so101", 0.3), ("*", 0.2)) and m.share == "tokens"
    assert MixSpec.from_json(m.to_json()) == m
    assert MixSpec.parse("task=pick the cube:2,push:1").normalized == (("pick the cube", 2 / 3), ("push", 1 / 3))
    f = tmp_path / "mix.yaml"
    f.write_text("key: source\nshare: tokens\nepoch_size: 1000\nweights:\n  rollout: 1\n  recorded: 3\n")
    y = load_mix(str(f))
    assert y == MixSpec(key="source", weights=(("rollout", 1.0), ("recorded", 3.0)), share="tokens", epoch_size=1000)
    assert load_mix(str(f), share="samples").share == "samples"
    spec = _spec()
    assert PackSpec.from_json(spec.to_json()) == spec
    assert "mix" not in _spec(None).to_json()  # specs without a mixture keep their old digest


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("gr1:0.5", "no KEY="),
        ("robot=gr1:1", "mixture key must be one of"),
        ("embodiment=gr1", "not VALUE:WEIGHT"),
        ("embodiment=gr1:x", "not a number"),
        ("embodiment=gr1:1,gr1:2", "more than once"),
        ("embodiment=gr1:-1,so101:1", "finite number >= 0"),
        ("embodiment=gr1:0", "sum to 0"),
    ],
)
def test_malformed_mixtures_say_what_to_write(text, match):
    with pytest.raises(ValueError, match=match):
        MixSpec.parse(text)


def test_mixture_files_are_checked(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mix(str(tmp_path / "none.yaml"))
    (tmp_path / "bad.yaml").write_text("key: embodiment\nweights: [1, 2]\n")
    with pytest.raises(ValueError, match="not a \\[value, weight\\] pair"):
        load_mix(str(tmp_path / "bad.yaml"))
    (tmp_path / "extra.yaml").write_text("key: embodiment\nweights: {gr1: 1}\nshares: tokens\n")
    with pytest.raises(ValueError, match="unknown mixture fields"):
        load_mix(str(tmp_path / "extra.yaml"))


# --- the draw ----------------------------------------------------------------------------------


def test_draw_meets_sample_shares_exactly_repeating_and_subsampling(lake):
    spec = _spec()
    index = build_sample_index(lake, spec)
    mixture = mixture_for(lake, index, spec)
    assert mixture is not None
    ids, left_out = epoch_samples(index, spec, mixture=mixture)
    assert left_out.size == 0 and len(ids) == index.num_samples  # the epoch is as large as the lake
    shares = _component_share(lake, index, ids, "embodiment")
    assert shares["gr1"] == pytest.approx(0.5, abs=1e-3) and shares["so101"] == pytest.approx(0.3, abs=1e-3)
    comp = mixture.labels[index.episode_of(ids)]
    gr1, rest = ids[comp == 0], ids[comp == 2]
    pool = int(mixture.cycle[0])
    assert len(gr1) > 2 * pool  # gr1 is ~10% of the lake: repeated
    counts = Counter(gr1.tolist())
    assert set(counts) == set(
        np.flatnonzero(mixture.labels[index.episode_of(np.arange(index.num_samples))] == 0).tolist()
    )
    assert max(counts.values()) - min(counts.values()) <= 1  # whole cycles, then part of one more
    first, second = gr1[:pool], gr1[pool : 2 * pool]
    assert sorted(first.tolist()) == sorted(second.tolist()) and not np.array_equal(
        first, second
    )  # each repeat its own order
    assert len(set(rest.tolist())) == len(rest) < int(mixture.cycle[2])  # subsampled, without replacement
    again, _ = epoch_samples(index, spec, mixture=mixture)
    assert np.array_equal(ids, again)  # deterministic for the seed
    other, _ = epoch_samples(index, dataclasses.replace(spec, seed=1), mixture=mixture)
    assert not np.array_equal(ids, other)


def test_consecutive_epochs_continue_each_stream(lake):
    spec = _spec("embodiment=arm7:0.1,*:0.9")  # arm7 (~40% of the lake) subsampled to 10%
    index = build_sample_index(lake, spec)
    mixture = mixture_for(lake, index, spec)
    assert mixture is not None
    epochs = [epoch_samples(index, spec, mixture=mixture, epoch=e)[0] for e in range(3)]
    arm7 = [set(e[mixture.labels[index.episode_of(e)] == 0].tolist()) for e in epochs]
    assert not arm7[0] & arm7[1] and not arm7[1] & arm7[2] and not arm7[0] & arm7[2]  # every sample before any twice


def test_token_shares_and_epoch_size(lake):
    spec = _spec(share="tokens")
    index = build_sample_index(lake, spec)
    mixture = mixture_for(lake, index, spec)
    assert mixture is not None
    ids, _ = epoch_samples(index, spec, mixture=mixture)
    shares = _component_share(lake, index, ids, "embodiment", unit="tokens")
    assert abs(shares["gr1"] - 0.5) < 0.01 and abs(shares["so101"] - 0.3) < 0.01
    report = mixture.report(*mixture.counts(index, ids))
    assert report["unit"] == "tokens" and report["max_abs_error"] < 0.01
    assert int(index.length_of(ids).sum()) == pytest.approx(int(mixture.cycle.sum()), rel=0.01)
    sized = _spec(share="samples")
    sized = dataclasses.replace(sized, mix=dataclasses.replace(sized.mix, epoch_size=1000))
    small = mixture_for(lake, index, sized)
    assert small is not None and len(epoch_samples(index, sized, mixture=small)[0]) == 1000


def test_source_and_tag_membership(lake):
    spec = _spec("source=rollout:0.5,recorded:0.5")
    index = build_sample_index(lake, spec)
    mixture = mixture_for(lake, index, spec)
    assert mixture is not None
    ids, _ = epoch_samples(index, spec, mixture=mixture)
    assert _component_share(lake, index, ids, "source")["rollout"] == pytest.approx(0.5, abs=1e-3)
    keep = sorted(index.episodes["episode_id"].to_pylist())[:10]
    create_tag(lake.uri, "first-ten", lake.version, episodes=keep, replace=True)
    tagged = _spec("tag=first-ten:0.25,*:0.75")
    m2 = mixture_for(lake, index, tagged)
    assert m2 is not None
    members = set(np.asarray(index.episodes["episode_id"].to_pylist())[m2.labels == 0].tolist())
    assert members == set(keep)
    drawn, _ = epoch_samples(index, tagged, mixture=m2)
    assert np.mean(m2.labels[index.episode_of(drawn)] == 0) == pytest.approx(0.25, abs=1e-3)


def test_a_value_naming_nothing_fails_naming_what_there_is(lake):
    index = build_sample_index(lake, _spec())
    with pytest.raises(
        ValueError, match=r"embodiment=ur5 names no episode .* values are \['aloha', 'arm7', 'gr1', 'so101'\]"
    ):
        mixture_for(lake, index, _spec("embodiment=ur5:1,*:1"))
    with pytest.raises(ValueError, match="does not have: lake .* has no tag .nope."):
        mixture_for(lake, index, _spec("tag=nope:1"))
    with pytest.raises(ValueError, match="bind it to the index first"):
        plan_sequences(index, _spec())


def test_oversize_samples_stay_out_of_the_pools(lake):
    # gr1 has 3 cameras (48 view tokens + text); max_tokens 47 leaves it unpackable, and some of the rest.
    spec = dataclasses.replace(_spec("embodiment=gr1:0.5,*:0.5"), max_tokens=47, on_oversize="reject")
    index = build_sample_index(lake, spec)
    assert (index.episode_length > 47).any() and (index.episode_length <= 47).any()
    mixture = mixture_for(lake, index, dataclasses.replace(spec, mix=MixSpec.parse("embodiment=so101:0.5,*:0.5")))
    assert mixture is not None
    ok = dataclasses.replace(spec, mix=MixSpec.parse("embodiment=so101:0.5,*:0.5"))
    seqs, rejected = plan_sequences(index, ok, mixture=mixture)
    assert len(rejected) == len(set(rejected.tolist())) == int((index.length > 47).sum())  # each once, never drawn
    assert all(index.length_of(q).sum() <= 47 for q in seqs)
    with pytest.raises(ValueError, match="no sample that fits max_tokens"):
        plan_sequences(index, spec, mixture=mixture_for(lake, index, spec))
    with pytest.raises(ValueError, match="more than max_tokens"):
        window_sequences(
            index, dataclasses.replace(ok, on_oversize="error"), shuffle_seed=0, packer_seed=0, mixture=mixture
        )


# --- pack and the lake stream ------------------------------------------------------------------


@pytest.mark.parametrize("ranges", [False, True])
def test_pack_records_the_mixture_and_meets_it(lake, tmp_path, ranges):
    spec = _spec(algorithm="window" if ranges else "bfd")
    m = pack(lake, spec, str(tmp_path / "p"), plan_range_samples=1500 if ranges else 4_000_000)
    again = read_manifest(str(tmp_path / "p"))
    assert again.pack_spec.mix == spec.mix and again.mixture == m.mixture and m.mixture is not None
    shares = {c["value"]: c["realised_share"] for c in m.mixture["components"]}
    assert shares == pytest.approx({"gr1": 0.5, "so101": 0.3, "*": 0.2}, abs=0.002)
    assert m.num_samples == sum(c["drawn_samples"] for c in m.mixture["components"])
    import lance

    rows = (
        lance.dataset(str(tmp_path / "p" / "shards.lance"), version=m.shards_version)
        .to_table(columns=["episode_id"])
        .to_pylist()
    )
    tags = Counter(e.split("/")[0] for r in rows for e in r["episode_id"])
    assert sum(tags.values()) == m.num_samples
    assert tags["gr1"] / m.num_samples == pytest.approx(0.5, abs=0.002)
    with pytest.raises(ValueError, match="drop `spec`/`mix`"):
        open_batches(str(tmp_path / "p"), mix=MIX)


def test_lake_stream_gives_every_rank_the_mixture_and_resumes(lake):
    spec = _spec(algorithm="window", window=512)
    cfg = LoaderConfig(sequences_per_batch=2, image_size=8, num_workers=0)
    ranks = [LakeStream(lake, spec, cfg, rank=r, world_size=2) for r in range(2)]
    for s in ranks:
        bins, batches = s._plan(0)
        ids = np.concatenate([bins[i] for b in batches for i in b])
        assert _component_share(lake, s.index, ids, "embodiment")["gr1"] == pytest.approx(0.5, abs=0.01)
    whole = [b.sample_keys for b in LakeStream(lake, spec, cfg)]
    s = LakeStream(lake, spec, cfg)
    it = iter(s)
    head = [next(it).sample_keys for _ in range(3)]
    state = s.state_dict()
    resumed = LakeStream(lake, spec, cfg)
    resumed.load_state_dict(state)
    assert head + [b.sample_keys for b in resumed] == whole
    other = LakeStream(lake, _spec("embodiment=gr1:0.2,*:0.8", algorithm="window", window=512), cfg)
    with pytest.raises(ValueError):
        other.load_state_dict(state)  # another mixture is another plan
    via_open = open_batches(lake, cfg, spec=_spec(None, algorithm="window", window=512), mix=MIX)
    assert isinstance(via_open, LakeStream) and via_open.spec.mix == spec.mix


def test_the_shard_loader_deals_a_mixed_pack_so_every_rank_gets_the_mixture(lake, tmp_path):
    import lance

    from robolake.loaders import PackedLoader
    from robolake.loaders.torch_loader import epoch_batches
    from robolake.packers.mix import row_strata

    m = pack(lake, _spec(), str(tmp_path / "p"))
    strata = row_strata(m.mixture)
    assert strata is not None and len(strata) == m.num_sequences
    rows = (
        lance.dataset(str(tmp_path / "p" / "shards.lance"), version=m.shards_version)
        .to_table(columns=["episode_id"])
        .to_pylist()
    )
    cfg = LoaderConfig(sequences_per_batch=1, image_size=8, num_workers=0)
    dealt, shuffled = [], []
    for rank in range(4):
        mine = np.concatenate(PackedLoader(str(tmp_path / "p"), cfg, rank=rank, world_size=4).dataset.batches())
        plain = np.concatenate(
            epoch_batches(len(rows), epoch=0, rank=rank, world_size=4, config=cfg)
        )  # no strata: at random
        for out, idx in ((dealt, mine), (shuffled, plain)):
            tags = [e.split("/")[0] for i in idx for e in rows[int(i)]["episode_id"]]
            out.append(tags.count("gr1") / len(tags))
    assert sorted(
        np.concatenate(
            [
                np.concatenate(PackedLoader(str(tmp_path / "p"), cfg, rank=r, world_size=4).dataset.batches())
                for r in range(4)
            ]
        ).tolist()
    ) == list(range(len(rows)))  # every row once
    assert max(abs(s - 0.5) for s in dealt) < 0.01
    assert max(abs(s - 0.5) for s in dealt) < max(abs(s - 0.5) for s in shuffled)
    with pytest.raises(ValueError, match="row strata name"):
        epoch_batches(len(rows) + 1, epoch=0, rank=0, world_size=4, config=cfg, strata=strata)


def test_the_documented_mixture_file_loads(tmp_path):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "packing.md").read_text()  # the manual's mixture file
    section = page.split("## Mixtures", 1)[1]
    (block,) = re.findall(r"```yaml\n(.*?)```", section.split("\n## ", 1)[0], flags=re.S)
    (tmp_path / "mix.yaml").write_text(block)
    m = load_mix(str(tmp_path / "mix.yaml"))
    assert m == MixSpec(
        key="embodiment", weights=(("gr1", 0.5), ("so101", 0.3), ("*", 0.2)), share="tokens", epoch_size=2_000_000
    )
