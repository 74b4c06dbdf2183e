"""`bench peers` without the peers' environments: the figures it assembles, the line protocol to
a peer script, and how a failed build reads. With the environments built (`robolake bench peers
--build-only`), the slow tests at the end run the peers for real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from robolake.bench import available
from robolake.bench._common import Timing
from robolake.bench.peers import (
    HERE,
    PEERS,
    Arm,
    Peer,
    PeerEnv,
    PeerError,
    assemble,
    bfd_figures,
    default_cache,
    ensure_env,
    find_python,
    loader_figures,
)


def _arm(seconds: list[float], samples: float, cpu_factor: float = 1.0) -> Arm:
    return Arm([Timing(wall_s=s, cpu_s=s * cpu_factor) for s in seconds], [samples] * len(seconds))


def test_peers_is_a_benchmark_and_its_peer_scripts_are_not():
    names = available()
    assert "peers" in names
    assert not any(n.startswith("_peer") for n in names)
    for peer in PEERS.values():
        source = (HERE / peer.script).read_text()
        compile(source, peer.script, "exec")  # the script the peer's Python runs parses


def test_loader_speedup_is_robolake_over_the_faster_backend_per_round():
    robolake = _arm([1.0, 2.0, 1.0], 1000)  # 1000, 500, 1000 samples/s
    lerobot = {"torchcodec": _arm([10.0, 10.0, 20.0], 500), "pyav": _arm([50.0, 50.0, 50.0], 500)}  # 50, 50, 25 vs 10
    fig = loader_figures(robolake, lerobot)
    assert fig["best_backend"] == "torchcodec"
    wall = fig["speedup"]["wall"]
    assert wall["values"] == pytest.approx([20.0, 10.0, 40.0])
    assert wall["median"] == pytest.approx(20.0)
    assert fig["speedup"]["target_applies_to"] == "wall"
    assert fig["speedup_by_backend"]["pyav"]["wall"]["median"] == pytest.approx(100.0)

    res = assemble({"real": fig, "av1": fig}, None, versions={"lerobot": {"lerobot": "9.9", "torch": "x"}})
    assert res["lerobot"] == {
        "version": "9.9",
        "samples_per_s": 50.0,
        "backend": "torchcodec",
        "versions": {"lerobot": "9.9", "torch": "x"},
    }
    assert res["robolake"]["samples_per_s"] == pytest.approx(1000.0)
    assert res["speedup"] == {"real": pytest.approx(20.0), "av1": pytest.approx(20.0)}
    assert "trl" not in res and "bfd_speedup" not in res
    json.dumps(res)  # JSON-ready


def test_bfd_speedup_is_on_cpu_time():
    arms = {
        "robolake_plan": _arm([0.01, 0.01, 0.01], 10_000, cpu_factor=1.0),
        "robolake_plan_take": _arm([0.1, 0.1, 0.1], 10_000),
        "trl_pack_dataset": _arm([4.0, 6.0, 8.0], 10_000, cpu_factor=0.5),  # wall stretched by load
        "trl_pack_bfd_table": _arm([5.0, 5.0, 5.0], 10_000),
    }
    res = assemble(None, bfd_figures(arms), versions={"trl": {"trl": "1.0"}})
    assert res["bfd_speedup"] == pytest.approx(300.0)  # cpu: 3.0 / 0.01
    assert res["bfd_speedup_spread"]["wall"]["median"] == pytest.approx(600.0)
    assert res["bfd_speedup_with_take"]["cpu"]["median"] == pytest.approx(30.0)
    assert res["trl"]["version"] == "1.0"
    assert res["trl"]["samples_per_s"] == pytest.approx(10_000 / 6.0)
    assert res["target_applies_to"] == {"speedup": "wall", "bfd_speedup": "cpu"}


def test_a_peer_script_answers_one_line_per_request(tmp_path):
    # the TRL script's `versions` needs only the standard library: run it here, for real
    with Peer(Path(sys.executable), HERE / "_peer_trl.py", tmp_path / "trl.log") as peer:
        versions = peer.request("versions")["versions"]
        assert set(versions) >= {"trl", "datasets", "pyarrow"}
        with pytest.raises(PeerError, match="'no_such_op' failed: KeyError"):
            peer.request("no_such_op")
        assert peer.request("versions")["versions"] == versions  # still up after an error
        peer.proc.stdin.write('{"op": "quit"}\n')
        peer.proc.stdin.flush()
        peer.proc.wait(timeout=30)
        with pytest.raises(PeerError, match="exited during 'versions'"):
            peer.request("versions")


def test_no_interpreter_is_one_line_naming_the_version():
    with pytest.raises(PeerError, match=r"no Python 2\.1 on this machine"):
        find_python("2.1")


def test_a_failed_install_names_the_step_and_its_log_and_leaves_no_marker(tmp_path):
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        find_python(minor)
    except PeerError:
        pytest.skip(f"no Python {minor} to build a venv from")
    bad = PeerEnv(
        name="bad", version="0", python=minor, requirements=(str(tmp_path / "missing.whl"),), script="_peer_trl.py"
    )
    with pytest.raises(PeerError) as err:
        ensure_env(bad, tmp_path, log=lambda _: None)
    message = str(err.value)
    assert "cannot build the bad environment: pip install" in message
    assert str(tmp_path / "bad-0" / "install.log") in message
    assert "\n" not in message
    assert not (tmp_path / "bad-0" / "robolake-peer.json").exists()


def _built(name: str) -> bool:
    return (PEERS[name].directory(default_cache()) / "robolake-peer.json").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not _built("trl"), reason="TRL's environment is not built (robolake bench peers --build-only)")
def test_trl_for_real(tmp_path):
    from robolake.bench.peers import measure_bfd, start_peer

    with start_peer("trl", default_cache(), tmp_path) as peer:
        fig = measure_bfd(peer, tmp_path, quick=True, samples=5_000)
    assert fig["trl"]["pack_dataset"]["fill"] > 0.9
    assert (
        fig["robolake"]["plan"]["fill"] >= fig["trl"]["pack_dataset"]["fill"]
    )  # one BFD over all, not batches of 1,000
    assert fig["bfd_speedup"]["cpu"]["median"] > 1.0


@pytest.mark.slow
@pytest.mark.skipif(
    not _built("lerobot"), reason="LeRobot's environment is not built (robolake bench peers --build-only)"
)
def test_lerobot_dataset_for_real(tmp_path):
    from robolake.bench.peers import start_peer

    with start_peer("lerobot", default_cache(), tmp_path) as peer:
        root = tmp_path / "av1"
        made = peer.request(
            "make_av1", root=str(root), repo_id="local/t", fps=20, height=48, width=64, lengths=[20, 12]
        )
        assert made["frames"] == 32
        opened = peer.request(
            "open",
            root=str(root),
            repo_id="local/t",
            backend="pyav",
            horizon=16,
            batch_size=8,
            num_workers=0,
            step_stride=2,
        )
        assert opened["samples"] == 16  # every 2nd step of each episode
        epoch = peer.request("epoch")
    assert epoch["samples"] == 16
    assert epoch["action_shape"] == [16, 7]
    assert epoch["image_shape"] == [3, 48, 64]


@pytest.mark.slow  # a server, an ingest and a pack: 15 s on a quiet machine, minutes on a loaded one
def test_the_s3_arm_reads_the_same_epoch_from_the_bucket(tmp_path):
    """robolake's side of the S3 arm: the pack output copied into moto's bucket reads as the same
    epoch as on disk (the shards hold the frames; no lake needed)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    from robolake.bench._s3_loader import _build
    from robolake.bench.peers.robolake_side import drain
    from robolake.bench.peers.s3_arm import open_s3_loader, s3_copies, s3_unavailable
    from robolake.loaders import LoaderConfig, PackedLoader, open_shards

    assert s3_unavailable() is None
    _, packed, _ = _build(str(tmp_path), 3, 20)
    config = LoaderConfig(sequences_per_batch=4, image_size=16, num_workers=0)
    local = drain(PackedLoader(open_shards(packed), config))
    with s3_copies({"packed": Path(packed)}) as remote:
        assert remote.uris == {"packed": "s3://robolake/packed"} and remote.bytes_copied["packed"] > 0
        assert drain(open_s3_loader(remote.uris["packed"], remote.storage_options, config)) == local
    assert local[0] > 0


def test_without_moto_the_s3_arm_is_one_line(monkeypatch):
    from robolake.bench.peers.s3_arm import s3_unavailable

    monkeypatch.setitem(sys.modules, "moto.server", None)  # importing it now raises ImportError
    reason = s3_unavailable()
    assert reason and "moto" in reason and "\n" not in reason
