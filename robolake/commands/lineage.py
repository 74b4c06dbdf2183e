"""`robolake lineage RUN [--json]`: from a checkpoint back to every episode's source file
(see robolake.training.lineage)."""

from __future__ import annotations

import argparse
import json

from robolake.commands.common import add_storage_option_argument, storage_options_of

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lineage",
        help="trace a checkpoint back to its pack output, lake version and every episode's source file",
        description=(
            "Print the chain a checkpoint was trained from: the pack output (its manifest checked against the hash "
            "recorded at training time) or the lake packed on the fly, the lake version and tag, each rank's sample "
            "ledger, and every episode with the source file it was ingested from."
        ),
    )
    p.add_argument("run", help="a run directory, its checkpoints/ directory, or one checkpoint")
    add_storage_option_argument(p)
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.training.lineage import trace_lineage

    report = trace_lineage(args.run, storage_options=storage_options_of(args))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    lin = report.lineage
    print(f"checkpoint {report.checkpoint} (step {report.step})")
    if lin.get("source") == "pack":
        state = {True: "matches", False: "DIFFERS", None: "not checked"}[report.pack_matches]
        spec = lin.get("pack_spec") or {}
        print(
            f"  trained on packed shards {lin['pack_uri']} (shards version {lin.get('shards_version')}, "
            f"manifest sha256 {str(lin.get('pack_manifest_sha256'))[:16]}... {state}; "
            f"max_tokens {spec.get('max_tokens')}, seed {spec.get('seed')})"
        )
    else:
        print("  trained on the lake, packed on the fly")
    tag = f" (tag {lin['lake_tag']})" if lin.get("lake_tag") else ""
    print(f"  from lake {lin['lake_uri']} at version {lin['lake_version']}{tag}")
    for rank, ledger in sorted((lin.get("samples") or {}).items()):
        if ledger:
            print(
                f"  samples of rank {rank}: {ledger['lines']} batches in {ledger['file']} "
                f"(sha256 {ledger['sha256'][:16]}...)"
            )
    for note in report.notes:
        print(f"  note: {note}")
    print(f"  {len(report.episodes)} episodes:")
    for e in report.episodes:
        print(f"    {e.episode_id}  {e.source_format}  {e.source_path}")
    return 0
