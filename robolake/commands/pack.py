"""`robolake pack LAKE OUT`: pack a lake version into cu_seqlens shards (Ray Data), with lineage."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from robolake.commands.common import add_tag_arguments, open_lake_at, quiet_ray, tqdm_progress

__all__ = ["DEFAULT_TOKENS_PER_VIEW", "register", "run", "spec_from_args"]

# Tokens per camera view that every model preset accepts (a preset pools its patches down to it, so
# it needs at least that many: tiny has 16, small and n15 256): shards packed with the defaults
# train with `robolake train --preset` anything. tests/unit/commands/test_defaults.py checks it.
DEFAULT_TOKENS_PER_VIEW = 16


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("pack", help="pack a lake into cu_seqlens shards (Ray Data) with lineage")
    s.add_argument("lake", help="the lake to pack (directory or object-store URI)")
    s.add_argument("out", help="where shards.lance and manifest.json are written")
    s.add_argument("--max-tokens", type=int, default=4096, help="capacity of one packed sequence, in backbone tokens")
    s.add_argument(
        "--algorithm",
        default="bfd",
        choices=["bfd", "ffd", "window"],
        help="best-fit decreasing, first-fit decreasing, or the bounded-memory window packer",
    )
    s.add_argument("--window", type=int, default=8192, help="samples held by the window packer")
    s.add_argument("--horizon", type=int, default=16, help="action chunk length H")
    s.add_argument(
        "--tokens-per-view",
        type=int,
        default=DEFAULT_TOKENS_PER_VIEW,
        help="backbone tokens per camera view; the model pools each view's patches down to it, so a preset "
        "needs at least that many patches (tiny has 16, small and n15 256)",
    )
    s.add_argument("--max-text-tokens", type=int, default=None, help="cap on instruction tokens (default: no cap)")
    s.add_argument("--step-stride", type=int, default=1, help="every k-th step starts a sample")
    s.add_argument("--seed", type=int, default=0, help="seed of the sample shuffle and the packer")
    s.add_argument("--lake-version", type=int, default=None, help="pack an older lake version (default: the newest)")
    add_tag_arguments(s)
    s.add_argument("--reject-oversize", action="store_true", help="record and skip samples over max-tokens")
    s.add_argument(
        "--mix",
        default=None,
        metavar="KEY=V:W,...|FILE",
        help="weighted mixture, e.g. 'embodiment=gr1:0.5,so101:0.3,*:0.2' (key: embodiment, task, source, tag "
        "or split; * = the rest), or a YAML/JSON file; groups repeat or subsample to their shares "
        "(default: every sample once)",
    )
    s.add_argument(
        "--mix-share",
        default=None,
        choices=["samples", "tokens"],
        help="what a mixture weight is a share of (default: samples, or the mixture file's `share`)",
    )
    s.add_argument(
        "--image-size",
        type=int,
        default=None,
        help="write frames at the model's input size N x N, a training rendition the loader never resizes "
        "(default: the recorded size, resized when loading)",
    )
    s.add_argument(
        "--history",
        action="append",
        default=[],
        metavar="STREAM[:FIELD]=SECONDS",
        help="give each sample the messages of a recorded stream in the SECONDS before its time, as their own "
        "tokens (as many as were recorded), e.g. /ft=0.1; repeatable (default: none)",
    )
    s.add_argument("--overwrite", action="store_true", help="replace an existing pack output at OUT")
    s.add_argument("--webdataset", default=None, metavar="DIR", help="also export WebDataset tars here (default: none)")
    s.add_argument("--no-progress", action="store_true", help="no progress bars")
    s.set_defaults(fn=run)


def spec_from_args(args: argparse.Namespace) -> Any:
    """The PackSpec a `robolake pack` command line asks for."""
    from robolake.packers import PackSpec, TokenLengthConfig, parse_history
    from robolake.packers.mix import load_mix

    return PackSpec(
        max_tokens=args.max_tokens,
        algorithm=args.algorithm,
        window=args.window,
        horizon=args.horizon,
        step_stride=args.step_stride,
        tokens=TokenLengthConfig(
            tokens_per_view=args.tokens_per_view, max_text_tokens=args.max_text_tokens, state_tokens=0
        ),
        seed=args.seed,
        on_oversize="reject" if args.reject_oversize else "error",
        image_size=args.image_size,
        # getattr: other commands build their spec here from a parser without the mixture options
        mix=None if getattr(args, "mix", None) is None else load_mix(args.mix, share=getattr(args, "mix_share", None)),
        history=tuple(parse_history(h) for h in getattr(args, "history", None) or ()),
    )


def run(args: argparse.Namespace) -> int:
    from robolake.packers import export_webdataset, pack

    quiet_ray()
    spec = spec_from_args(args)
    lake = open_lake_at(args.lake, args, args.lake_version)
    m = pack(lake, spec, args.out, overwrite=args.overwrite, progress=None if args.no_progress else tqdm_progress())
    print(
        f"packed {m.num_samples} samples from lake version {m.lake_version} into {m.num_sequences} sequences "
        f"of <= {spec.max_tokens} tokens ({args.algorithm}) in {m.seconds:.1f}s"
    )
    print(
        f"  fill {m.fill:.4f}: padding in packed sequences {1 - m.fill:.1%}; padded batches of the same samples "
        f"would spend {1 - m.padded_fill:.1%} of their tokens on padding (fill {m.padded_fill:.4f})"
    )
    if m.mixture is not None:
        parts = ", ".join(
            f"{c['value']} {c['realised_share']:.3f} (target {c['target_share']:.3f}, x{c['repeats']:.2f})"
            for c in m.mixture["components"]
        )
        print(f"  mixture by {m.mixture['key']}, shares of {m.mixture['unit']}: {parts}")
    if m.rejected:
        print(f"  rejected {len(m.rejected)} samples longer than max_tokens (listed in {args.out}/manifest.json)")
    if m.num_samples == 0:
        print(
            f"robolake pack: nothing was packed: all {len(m.rejected)} samples are longer than --max-tokens "
            f"{spec.max_tokens}; raise --max-tokens (longest sample: {max((r[2] for r in m.rejected), default=0)} "
            "tokens) or cap the instruction with --max-text-tokens",
            file=sys.stderr,
        )
        return 1
    _advise_capacity(lake, spec, m)
    if args.webdataset:
        tars = export_webdataset(args.out, args.webdataset)
        print(f"  exported {len(tars)} WebDataset tars to {args.webdataset}")
    return 0


def _advise_capacity(lake: Any, spec: Any, m: Any) -> None:
    """Say when packing cannot beat padding, and which --max-tokens would pack these lengths best."""
    from robolake.packers import build_sample_index
    from robolake.packers.suggest import suggest_max_tokens

    lengths = build_sample_index(lake, spec).length
    lengths = lengths[lengths <= spec.max_tokens]
    if lengths.size == 0:
        return
    s = suggest_max_tokens(lengths, spec.max_tokens, seed=spec.seed)
    if s.uniform:
        print(
            f"  every sample has the same length ({int(lengths[0])} tokens): padded batches waste nothing here, so "
            "packing cannot beat them; it only loses the tail of each sequence"
        )
    elif m.fill <= m.padded_fill + 0.005:
        print("  packing gains nothing over padding on these lengths (they barely differ)")
    if s.max_tokens != spec.max_tokens and s.fill > s.current_fill + 0.005:
        print(
            f"  suggestion: --max-tokens {s.max_tokens} packs these lengths to fill {s.fill:.3f} "
            f"(vs {s.current_fill:.3f})"
        )
