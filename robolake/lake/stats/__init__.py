"""Normalisation statistics: per-dimension moments, mergeable quantile sketches, and the
embodiments table they feed (private to robolake.lake).
"""
