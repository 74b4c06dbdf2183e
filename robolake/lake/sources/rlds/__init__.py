"""RLDS / Open-X TFRecord datasets: the TFRecord reader and writer, and the episode reader."""
