#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh: seconds when it is current, a full install otherwise) and runs
# the default test suite (slow and GPU tests are opt-in). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh  # chromium + chromedriver for tests/integration/test_view_browser.py
exec .venv/bin/python -m pytest -q "$@"
