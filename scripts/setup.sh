#!/usr/bin/env bash
# Creates .venv with robolake and its dev tools. torch==2.13.0 goes in first: an unpinned torch
# would pull a multi-GB CUDA build, and every later requirement accepts the one installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev,sim]"
.venv/bin/python -m ipykernel install --user --name python3 >/dev/null 2>&1 || true
