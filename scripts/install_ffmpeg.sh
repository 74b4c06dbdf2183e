#!/usr/bin/env bash
# Installs FFmpeg's shared libraries (libavutil, libavcodec, libavformat, ...), which torchcodec,
# LeRobot's default video decoder, loads at run time: `robolake bench peers` needs them for the
# LeRobot peer (without them torchcodec fails with "libavutil.so.60: cannot open shared object file").
# Idempotent: does nothing when a libavutil FFmpeg 4-8 provides (so.56-so.60) is already on the loader path.
# Debian/Ubuntu: apt-get (as root, through sudo otherwise); Fedora/RHEL: dnf; macOS: brew.
set -euo pipefail
if ldconfig -p 2>/dev/null | grep -Eq 'libavutil\.so\.(56|57|58|59|60)\b'; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    as_root=()
fi
if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; then
        echo "install_ffmpeg.sh: not root and no sudo; run as root: apt-get install ffmpeg" >&2
        exit 1
    fi
    echo "install_ffmpeg.sh: installing ffmpeg with apt-get (a minute or two)" >&2
    ${as_root[@]+"${as_root[@]}"} apt-get update -q
    ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ffmpeg
elif command -v dnf >/dev/null 2>&1; then
    echo "install_ffmpeg.sh: installing ffmpeg-free with dnf" >&2
    ${as_root[@]+"${as_root[@]}"} dnf install -y ffmpeg-free
elif command -v brew >/dev/null 2>&1; then
    echo "install_ffmpeg.sh: installing ffmpeg with Homebrew" >&2
    brew install ffmpeg
else
    echo "install_ffmpeg.sh: no apt-get, dnf or brew here; install FFmpeg 4-8's shared libraries (libavutil.so.56-60) with your package manager" >&2
    exit 1
fi
