"""An epoch's frame indices under a mixture, by the one mixture implementation (`robolake.packers`).

A mixture (`task=pick:0.7,*:0.3`) says what share of an epoch each embodiment, task, source,
tag or split contributes; `packers.mix` draws it (repeating small components in fresh orders,
subsampling large ones, consecutive epochs continuing each component's stream). Here a frame
is a sample of one token, so shares of samples and of tokens are the same thing, and the draw
is exactly the one `robolake pack` makes for the same episodes, seed and epoch.
"""

from __future__ import annotations

import numpy as np

from robolake.integrations.lerobot.source import FrameTable, LakeSource

__all__ = ["draw_epoch"]


def draw_epoch(source: LakeSource, table: FrameTable, *, epoch: int = 0) -> np.ndarray:
    """int64 global frame indices epoch `epoch` holds (every frame once without a mixture).

    Raises:
        ValueError: the mixture names nothing in the selection (its message lists what there is).
    """
    n = table.num_frames
    if source.mix is None:
        return np.arange(n, dtype=np.int64)
    import pyarrow as pa

    from robolake.lake import sql_in
    from robolake.packers import SampleIndex, bind_mixture, load_mix

    spec = load_mix(source.mix)
    lake = source.open()
    if lake.version != table.lake_version:
        lake = lake.checkout(table.lake_version)
    rows = lake.episodes(
        sql_in("episode_id", table.episode_ids), columns=["episode_id", "embodiment", "task", "num_steps", "cameras"]
    )
    order = {e: i for i, e in enumerate(rows["episode_id"].to_pylist())}
    episodes = rows.take(pa.array([order[e] for e in table.episode_ids]))
    k = table.num_episodes
    index = SampleIndex(
        episodes=episodes,
        sample_start=table.starts,
        step_stride=1,
        episode_length=np.ones(k, dtype=np.int64),  # one token a frame: samples and tokens coincide
        step_offset=np.zeros(k, dtype=np.int64),
        media_offset=np.zeros((k, 1), dtype=np.int64),
        embodiments=(table.spec.tag,),
    )
    mixture = bind_mixture(lake, index, spec, max_tokens=1)
    return np.sort(mixture.draw(index, np.arange(n, dtype=np.int64), seed=source.seed, epoch=epoch))
