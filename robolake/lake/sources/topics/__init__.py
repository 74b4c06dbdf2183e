"""Topic logs (ROS 1 bags, ROS 2 bags, MCAP): message decoding, the topic plan, numeric streams, reader, inspect."""
