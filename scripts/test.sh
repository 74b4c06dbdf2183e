#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the default test suite (slow and GPU tests are opt-in).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
