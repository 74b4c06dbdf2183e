"""LeRobot's Lance layout (`lerobot-lancedb`): the LeRobot reader over frames / videos / meta Lance tables."""

from robolake.lake.sources.lerobot_lance.reader import FORMAT, LeRobotLanceReader, is_lerobot_lance

__all__ = ["FORMAT", "LeRobotLanceReader", "is_lerobot_lance"]
