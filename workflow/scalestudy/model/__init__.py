"""The bottom layer: plain data and helpers that every other layer shares.

Nothing here imports another part of scalestudy: the point and sweep model (point.py),
the one error type of bad input (errors.py), the one H:M:S parser and formatter
(timefmt.py), the one declaration of every figure (metrics.py), the one owner of the
results layout (paths.py), and the rank probe with the reader of its lines
(rank_probe.py, a stand-alone script).
"""
