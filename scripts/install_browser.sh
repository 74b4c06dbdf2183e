#!/usr/bin/env bash
# Installs the headless browser the viewer's browser tests drive (tests/integration/test_view_browser.py):
# Debian's chromium and its chromedriver, at /usr/bin/chromium and /usr/bin/chromedriver.
# Idempotent: does nothing when both are there. Uses apt-get as root, through sudo otherwise.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install_browser.sh: not root and no sudo; install chromium and chromium-driver with your package manager" >&2
    exit 1
fi
echo "install_browser.sh: installing chromium and chromium-driver (a few minutes)" >&2
${as_root[@]+"${as_root[@]}"} apt-get update -q
${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
