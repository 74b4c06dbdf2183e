from __future__ import annotations

import threading

from robolake.loaders import LoaderConfig, RayPackedStream


def test_epoch_reads_every_sample_once(packed_data, ray_session):
    stream = RayPackedStream(str(packed_data.packed), LoaderConfig(sequences_per_batch=2, image_size=16, seed=4))
    keys = [k for batch in stream for k in batch.sample_keys]
    assert len(keys) == packed_data.num_samples == len(set(keys))
    batch = next(iter(stream))
    assert tuple(batch.pixels.shape[1:]) == (3, 16, 16)


def test_streaming_split_is_disjoint_and_complete(packed_data, ray_session):
    stream = RayPackedStream(str(packed_data.packed), LoaderConfig(sequences_per_batch=1, image_size=8, shuffle=False))
    parts = stream.split(2, equal=False)
    got: list[list] = [[], []]

    def consume(i: int) -> None:
        for batch in parts[i]:
            got[i].extend(batch.sample_keys)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got[0] and got[1]
    assert not set(got[0]) & set(got[1])
    assert len(got[0]) + len(got[1]) == packed_data.num_samples
