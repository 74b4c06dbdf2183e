"""Camera frames in the lake: the record of what cameras recorded, codecs, and FrameReader's random
access (private to robolake.lake).
"""
