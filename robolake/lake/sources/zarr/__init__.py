"""Zarr replay buffers (Diffusion Policy, UMI and the imitation codebases that copy them): layout,
reader, inspect.
"""
