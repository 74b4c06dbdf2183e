"""The fork server the loader's worker processes start from, started early.

Workers start from a fork server (Lance is not fork-safe, and spawning would re-import everything
in every worker) that imports numpy, pyarrow, Pillow and torch once, before its first fork. Left
to the DataLoader, the server starts at the first batch, and the trainer waits for those imports
(torch alone takes about 1.9 s on this machine): 2.1 s of a 300-step tiny run's 2.5 s of data
wait on the GR00T data. `start_fork_server` starts it without waiting for it, so its imports run
beside the caller's own start-up (the CLI's imports, opening the shards, building the model).

It sits outside `robolake.loaders` and imports nothing heavy, so a command can call it before
importing torch.
"""

from __future__ import annotations

__all__ = ["PRELOAD", "start_fork_server"]

PRELOAD = ["numpy", "pyarrow", "pyarrow.dataset", "PIL.Image", "torch"]


def start_fork_server() -> None:
    """Start the loader workers' fork server now, in the background (a no-op once it runs)."""
    from multiprocessing import forkserver

    forkserver.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()
