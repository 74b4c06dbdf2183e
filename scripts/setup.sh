#!/usr/bin/env bash
# Creates .venv with robolake and its dev tools. torch==2.13.0 goes in first: an unpinned torch
# would pull a multi-GB CUDA build, and every later requirement accepts the one installed here.
#
# Idempotent and fast when nothing changed: a finished setup writes .venv/.robolake-setup, the hash
# of pyproject.toml and this script; while the stamp matches and .venv imports this checkout's
# robolake, setup does nothing (the install is editable, so code changes need no reinstall).
# ROBOLAKE_SETUP_FORCE=1 (or `bash scripts/setup.sh --force`) reinstalls anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STAMP=.venv/.robolake-setup
want=$("$PY" -c 'import hashlib, sys; print(hashlib.sha256(b"".join(open(p, "rb").read() for p in sys.argv[1:])).hexdigest())' \
    pyproject.toml scripts/setup.sh)
# Whether .venv holds robolake installed (editable) from this checkout and its dependencies. Run with
# `python -I`: the checkout is then not on sys.path, so `robolake` must come from the install.
CHECK='
import importlib.util as u, os, sys
s = u.find_spec("robolake")
ok = s is not None and s.origin is not None and os.path.dirname(os.path.dirname(os.path.abspath(s.origin))) == os.getcwd()
sys.exit(0 if ok and all(u.find_spec(m) for m in ("torch", "lance", "ray", "pytest", "metaworld")) else 1)'
force=${ROBOLAKE_SETUP_FORCE:-0}
[ "${1:-}" = "--force" ] && force=1
if [ "$force" != 1 ] && [ -x .venv/bin/python ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
    && .venv/bin/python -I -c "$CHECK" 2>/dev/null; then
    echo "setup.sh: .venv is current (pyproject.toml and setup.sh unchanged); nothing to install" >&2
    exit 0
fi
rm -f "$STAMP"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev,sim]"
.venv/bin/python -m ipykernel install --user --name python3 >/dev/null 2>&1 || true
echo "$want" >"$STAMP"
