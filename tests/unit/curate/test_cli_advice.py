"""[30] Advice a command prints names options that exist: `delete --episodes nope` points at `info --episodes`."""

from __future__ import annotations

import json
from pathlib import Path

from robolake.cli import main
from robolake.lake import Lake


def test_delete_of_an_unknown_episode_advises_a_command_that_works(lake_dir: Path, capsys) -> None:
    rc = main(["delete", str(lake_dir), "--episodes", "nope", "--reason", "x"])
    err = capsys.readouterr().err
    assert rc != 0 and "info" in err and len(err.strip().splitlines()) == 1, err
    assert "--episodes" in err  # the advice: `robolake info LAKE --episodes`, which must run as written
    assert main(["info", str(lake_dir), "--episodes"]) == 0
    listed = capsys.readouterr().out.split()
    assert set(Lake.open(str(lake_dir)).episode_ids()) <= set(listed)
    assert main(["info", str(lake_dir), "--episodes", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["episode_id"] for r in rows} == set(Lake.open(str(lake_dir)).episode_ids())
    assert {"embodiment", "num_steps", "task"} <= set(rows[0])


def test_where_errors_are_one_line(lake_dir: Path, capsys) -> None:
    for where in ("not " * 20000 + "success", "(" * 5000 + "1" + ")" * 5000, "max(state[10**23]) > 0",
                  "max(state[100000000000000000000000]) > 0"):  # fmt: skip
        rc = main(["select", str(lake_dir), "--where", where, "--tag", "t"])
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err[:300]
        assert "MemoryError" not in err and "recursion" not in err and "OverflowError" not in err, err[:300]
