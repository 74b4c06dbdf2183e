"""HDF5 recordings (ALOHA/ACT, robomimic, robosuite, families of datasets, mapped files): layout
detection, reader, inspect.
"""
