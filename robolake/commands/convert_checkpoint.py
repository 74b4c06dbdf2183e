"""`robolake convert-checkpoint RUN [--trust]`: rewrite an older robolake's pickled checkpoints
(`step_N.pt`) as checkpoints that hold only tensors and JSON (`step_N/`, see
robolake.training.checkpoint).

A pickle can run any code when it is loaded, so robolake never loads one fully on its own: without
`--trust` only files PyTorch's restricted unpickler accepts are converted (and the others are
named); `--trust` unpickles them fully, which is safe only for files from someone you trust. The
`.pt` files are left where they are; the new directories beside them are what robolake reads.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert-checkpoint",
        help="rewrite an older run's pickled step_N.pt checkpoints as safetensors + JSON (step_N/)",
        description=(
            "Convert the legacy pickled checkpoints of RUN (a run directory, its checkpoints/ directory, or one "
            "step_N.pt file) into step_N/ directories holding model.safetensors, optimizer.safetensors and "
            "checkpoint.json. Loading a pickle can run code: pass --trust only for files from someone you trust."
        ),
    )
    p.add_argument("run", help="a run directory, its checkpoints/ directory, or a step_N.pt file")
    p.add_argument(
        "--trust",
        action="store_true",
        help="unpickle the files fully (this runs any code they hold: only for checkpoints whose author you trust)",
    )
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from robolake.training.checkpoint import (
        LegacyCheckpointError,
        convert_legacy_checkpoint,
        legacy_checkpoints,
    )

    files = legacy_checkpoints(args.run)
    if not files:
        raise FileNotFoundError(
            f"no step_N.pt checkpoint at {args.run} (nor in {args.run}/checkpoints); nothing to convert"
        )
    refused = []
    for f in files:
        try:
            out = convert_legacy_checkpoint(f, trust=args.trust)
        except LegacyCheckpointError:
            refused.append(f)
            continue
        print(f"{f} -> {out}")
    if refused:
        print(
            f"robolake convert-checkpoint: {len(refused)} file(s) hold more than tensors and were not converted "
            f"(first: {refused[0]}); loading them runs whatever code they hold: re-run with --trust only if you "
            "trust who made them",
            file=sys.stderr,
        )
        return 1
    return 0
