"""LeRobot datasets v2.0/v2.1/v3.0 with GR00T's modality.json: metadata checks, episode plan, reader."""
