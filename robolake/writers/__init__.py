"""Writers of source datasets: the LeRobot v2.x/v3.0 writer and the synthetic episode generator.

They produce inputs for `robolake ingest` (tests, demos, benchmarks, recorded simulation); the
readers live in `robolake.lake.sources`. Data still moves forward only: nothing here writes into
a lake.
"""

from robolake.writers.lerobot import EpisodeArrays, write_lerobot_dataset
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic, synthetic_episodes

__all__ = ["EpisodeArrays", "SyntheticConfig", "generate_synthetic", "synthetic_episodes", "write_lerobot_dataset"]
