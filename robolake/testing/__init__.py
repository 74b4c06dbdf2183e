"""Writers of real recordings in every format robolake reads, for tests, benchmarks and demos.

Each module writes files with the format's own writer (rosbags' bag writers, the `mcap` writer,
h5py, TFRecord framing with TFDS metadata), in the layouts real recorders produce, from smooth
known values so that what a reader returns can be checked exactly:

- `images`: test frames and their JPEG / PNG bytes;
- `ros`: ROS 2 bags (sqlite3 or MCAP), ROS 1 bags and non-ROS JSON MCAP files of a teleop rig
  (poses, odometry, IMU, TF, twists and bursts on one stamp among the extra streams);
- `mcap`: the same rig as MCAP in ROS 1, protobuf and mixed encodings (the mcap-ros1 and
  mcap-protobuf writers of the dev extra);
- `hdf5`: ALOHA/ACT, robomimic (with Isaac Lab's nested groups, odd cameras), robosuite, flat
  `states_{i}` / `actions_{i}` families and a home-grown HDF5 layout;
- `rlds`: prepared TFDS (RLDS / Open-X) directories;
- `zarr_buffers`: Diffusion Policy / UMI Zarr replay buffers (JPEG-XL frames or an mp4 tree), with real faults.

They live in the package, not in tests/, so that `robolake bench ingest` and the notebooks work
from an installed wheel. Importing them is cheap: each writer imports its format's library
(rosbags, mcap, h5py, PIL) when it runs.
"""

from robolake.testing import hdf5, images, mcap, rlds, ros, zarr_buffers

__all__ = ["hdf5", "images", "mcap", "rlds", "ros", "zarr_buffers"]
