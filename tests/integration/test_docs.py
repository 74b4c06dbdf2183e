"""The manual builds in strict mode, and every shell and Python snippet it shows runs.

`mkdocs build --strict` fails on a broken link, a page missing from the nav, or a docstring the
API reference cannot render. Then each page (README.md and docs/**/*.md) is turned into one
Python script, run as a plain script (`python page.py`, no `__main__` guard) in a fresh working
directory: its ```python blocks verbatim, in order, sharing one namespace, and each ```bash block
in between run by `bash -euo pipefail` with `.venv/bin` first on PATH. So no page can drift from
the code.

A block that cannot run here says so in the Markdown, on the line before its fence:

    <!-- skip: needs CUDA -->    never run here (GPU, a cluster address, a bucket, the whole suite)
    <!-- slow: trains a model --> run only with `-m slow`, together with the rest of its page

Skipped blocks are counted and reported (`test_snippets_are_accounted_for` prints the inventory).
The working directory holds `.venv` (a link to this checkout's) and `../shared/data` (the real
robot data beside the checkout, when present), so the pages' relative paths work as written; a
page that reads the real data is skipped when it is absent.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"
SHARED_DATA = REPO.parent / "shared" / "data"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
RUN_LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
MARK = re.compile(r"<!--\s*(skip|slow)\s*:\s*(.+?)\s*-->")
FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str  # "bash" or "python"
    code: str
    mark: str | None  # None, "skip" or "slow"
    reason: str


def parse_blocks(path: Path, root: Path = REPO) -> list[Block]:
    """The runnable (bash/python) fenced blocks of a Markdown page, with the mark on the line before each."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        ticks, lang = m.group(1), m.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        if lang in RUN_LANGS:
            prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = MARK.fullmatch(prev)
            blocks.append(
                Block(
                    page=str(path.relative_to(root)),
                    line=i + 1,
                    lang=RUN_LANGS[lang],
                    code="\n".join(lines[i + 1 : end]) + "\n",
                    mark=mark.group(1) if mark else None,
                    reason=mark.group(2) if mark else "",
                )
            )
        i = end + 1
    return blocks


def page_script(blocks: list[Block]) -> str:
    """One plain Python script for a page: Python blocks verbatim, bash blocks through `_sh`."""
    parts = [
        "import subprocess as _subprocess, sys as _sys\n",
        "def _sh(_code, _where):\n"
        "    print(f'$ [{_where}]', flush=True)\n"
        "    _r = _subprocess.run(['bash', '-euo', 'pipefail', '-c', _code])\n"
        "    if _r.returncode:\n"
        "        raise SystemExit(f'{_where}: bash block exited {_r.returncode}')\n",
    ]
    for b in blocks:
        where = f"{b.page}:{b.line}"
        if b.lang == "bash":
            parts.append(f"_sh({b.code!r}, {where!r})\n")
        else:
            parts.append(f"print('>>> [{where}]', flush=True)\n{b.code}")
    return "".join(parts)


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(VENV)
    if SHARED_DATA.is_dir():
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(SHARED_DATA)
    return work


def _run_page(page: Path, tmp_path: Path, *, slow: bool) -> None:
    blocks = [b for b in parse_blocks(page) if b.mark != "skip"]
    if not blocks:
        pytest.skip(f"{page.name} shows no snippet that runs here")
    if any("shared/data" in b.code for b in blocks) and not SHARED_DATA.is_dir():
        pytest.skip(f"{page.name} reads the real robot data, absent at {SHARED_DATA}")
    work = _workdir(tmp_path)
    script = work.parent / f"{page.stem}_snippets.py"
    script.write_text(page_script(blocks))
    env = {
        **os.environ,
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }
    start = time.monotonic()
    res = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=1800 if slow else 600,
        env=env,
    )
    print(f"{page.relative_to(REPO)}: {len(blocks)} blocks in {time.monotonic() - start:.1f}s")
    assert res.returncode == 0, (
        f"{page.relative_to(REPO)}'s snippets failed\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    )


def _is_slow(page: Path) -> bool:
    return any(b.mark == "slow" for b in parse_blocks(page))


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


RUNNABLE = [p for p in PAGES if any(b.mark != "skip" for b in parse_blocks(p))]
FAST = [p for p in RUNNABLE if not _is_slow(p)]
SLOW = [p for p in RUNNABLE if _is_slow(p)]


def test_docs_build_strict(tmp_path: Path) -> None:
    mkdocs = VENV / "bin" / "mkdocs"
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: pip install -e '.[dev]' (mkdocs-material, mkdocstrings-python)")
    start = time.monotonic()
    res = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    print(f"mkdocs build --strict: {time.monotonic() - start:.1f}s")
    assert res.returncode == 0, res.stderr[-5000:]
    for page in ("index.html", "getting-started/index.html", "api/lake/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # the API reference documents the facades, not the private rooms behind them
    api = (tmp_path / "site" / "api" / "lake" / "index.html").read_text()
    assert 'id="robolake.lake.Lake"' in api
    assert not re.search(r'id="robolake\.lake\.(protocol|media|intake|sources|stats|upkeep)\b', api)


def test_snippets_are_accounted_for() -> None:
    """Every bash/python block runs by default, runs under -m slow, or says why it cannot run here."""
    blocks = [b for p in PAGES for b in parse_blocks(p)]
    slow_pages = {_rel(p) for p in SLOW}
    counts = {
        "run": sum(b.mark is None and b.page not in slow_pages for b in blocks),
        "slow": sum(b.mark != "skip" and b.page in slow_pages for b in blocks),
        "skip": sum(b.mark == "skip" for b in blocks),
    }
    print(f"snippets: {counts['run']} run, {counts['slow']} run with -m slow, {counts['skip']} skipped")
    for b in blocks:
        if b.mark:
            print(f"  {b.mark}: {b.page}:{b.line}: {b.reason}")
    assert all(b.reason for b in blocks if b.mark), "a skip/slow mark needs a reason"
    assert counts["run"] >= 4, "the default run should exercise the manual's snippets"
    readme = parse_blocks(REPO / "README.md")
    assert any(b.mark is None for b in readme), "README.md's tour must run"


@pytest.mark.parametrize("page", FAST, ids=_rel)
def test_page_snippets_run(page: Path, tmp_path: Path) -> None:
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW, ids=_rel)
def test_slow_page_snippets_run(page: Path, tmp_path: Path) -> None:
    _run_page(page, tmp_path, slow=True)


def test_parse_blocks_reads_marks(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "# t\n\n<!-- skip: needs CUDA -->\n```bash\nnvidia-smi\n```\n\n```python\nx = 1\n```\n\n"
        "```yaml\na: 1\n```\n\n<!-- slow: trains -->\n\n```bash\necho hi\n```\n"
    )
    blocks = parse_blocks(page, root=tmp_path)
    assert [(b.lang, b.mark, b.reason) for b in blocks] == [
        ("bash", "skip", "needs CUDA"),
        ("python", None, ""),
        ("bash", "slow", "trains"),
    ]
    script = page_script([b for b in blocks if b.mark != "skip"])
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0 and "hi" in res.stdout
