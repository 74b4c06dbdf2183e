"""NumPy episodes (`.npz` files, folders of `.npy` files) with JSON sidecars: `reader` over `arrays` and `plan`."""

from robolake.lake.sources.npz.reader import FILE_FORMAT, FORMAT, NpzReader, inspect_npz

__all__ = ["FORMAT", "FILE_FORMAT", "NpzReader", "inspect_npz"]
