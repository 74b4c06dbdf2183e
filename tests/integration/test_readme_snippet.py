"""docs/getting-started.md's quickstart script runs as a plain script (no `if __name__ == "__main__":` guard).

DataLoader workers started by forkserver or spawn used to re-run an unguarded main script and die
("DataLoader worker exited unexpectedly"); the loader now starts them without the parent's
`__main__`.
The page as a whole (real data, minutes) runs under `-m slow` in test_docs.py; this runs its
script by default on the small packed fixture.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _snippet() -> str:
    page = REPO / "docs" / "getting-started.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    assert blocks, f"{page} has no Python snippet"
    return blocks[0]


def test_readme_snippet_runs_as_a_script(packed_data, tmp_path):
    os.symlink(packed_data.lake, tmp_path / "lake")
    os.symlink(packed_data.packed, tmp_path / "packed")
    script = tmp_path / "quickstart.py"
    script.write_text(_snippet().replace('task_contains="pick"', 'task_contains=""'))
    res = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "samples," in res.stdout and "cu_seqlens" in res.stdout
