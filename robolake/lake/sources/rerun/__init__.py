"""Rerun recordings (`.rrd`): loading through rerun-sdk, the plan of entities, the reader, inspect."""
