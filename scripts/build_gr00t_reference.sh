#!/usr/bin/env bash
# Build the environment that runs Isaac-GR00T's own LeRobotSingleDataset (tests/integration/test_gr00t_adapter.py).
#
# Isaac-GR00T is not on any package index, so its source comes from a git checkout or mirror:
#   scripts/build_gr00t_reference.sh GIT_DIR_OR_CHECKOUT [REV]     (REV default HEAD)
# Tested with a mirror of Isaac-GR00T N1.5's gr00t/ tree (gr00t/data/dataset.py with
# LeRobotSingleDataset, float32 state/action; NVIDIA/Isaac-GR00T is too large to mirror here, the
# fork dengpingsong/gr00t carries the same gr00t/data and gr00t/utils/video.py).
#
# Interpreter: the LeRobot peer environment `robolake bench peers --build-only` builds (it already
# has torch, torchvision, opencv, pandas, pydantic, av, tqdm, einops), so no second torch is
# downloaded. Added beside it, never into it, under $ROBOLAKE_GR00T_REF (default
# ~/.cache/robolake/gr00t-ref):
#   src/    gr00t/__init__.py, gr00t/data/, gr00t/utils/{__init__,video}.py from the source
#   site/   decord (GR00T's default video backend) and numpydantic (its schema), `pip --target`
#   stubs/  empty `pytorch3d` and `albumentations` modules: imported by GR00T's transform package
#           (rotation and augmentation transforms) but not by the dataset's reading path
# Run:  PYTHONPATH=$REF/src:$REF/site:$REF/stubs PEER_PYTHON scripts/gr00t_reference.py REQUEST.json
set -euo pipefail
SRC=${1:?usage: build_gr00t_reference.sh GIT_DIR_OR_CHECKOUT [REV]}
REV=${2:-HEAD}
REF=${ROBOLAKE_GR00T_REF:-$HOME/.cache/robolake/gr00t-ref}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${ROBOLAKE_PEER_PYTHON:-$("$HERE/.venv/bin/python" -c \
  "from robolake.bench.peers import default_cache, lerobot_python; print(lerobot_python(default_cache()) or '')")}
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo "no LeRobot peer environment: build it first with 'robolake bench peers --build-only'" >&2
  exit 1
fi
mkdir -p "$REF/src" "$REF/site" "$REF/stubs/pytorch3d" "$REF/stubs/albumentations"
PATHS="gr00t/__init__.py gr00t/data gr00t/utils/__init__.py gr00t/utils/video.py"
if [ -d "$SRC/.git" ] || [ -f "$SRC/HEAD" ]; then
  GIT_DIR=$([ -d "$SRC/.git" ] && echo "$SRC/.git" || echo "$SRC")
  # shellcheck disable=SC2086
  git --git-dir="$GIT_DIR" archive "$REV" $PATHS | tar -x -C "$REF/src"
else
  for p in $PATHS; do mkdir -p "$REF/src/$(dirname "$p")"; cp -r "$SRC/$p" "$REF/src/$(dirname "$p")/"; done
fi
"$PY" -m pip install --quiet --target "$REF/site" --no-deps decord numpydantic
: > "$REF/stubs/pytorch3d/__init__.py"; : > "$REF/stubs/pytorch3d/transforms.py"; : > "$REF/stubs/albumentations/__init__.py"
PYTHONPATH="$REF/src:$REF/site:$REF/stubs" "$PY" -c "import gr00t.data.dataset, decord; print('GR00T reference ready')"
echo "$PY" > "$REF/python"
