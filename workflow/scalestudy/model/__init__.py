"""The bottom layer: the domain every other layer shares, not only plain data: also the pure
computations on it that several layers need (the memory model, memory.py; the scaling figures;
the run order) and the rank probe, a program every rank runs (rank_probe.py), kept here so that
every layer and every app's rank program may import them.

Nothing here imports another part of scalestudy: the point and sweep model (point.py),
the one error type of bad input (errors.py), the one H:M:S parser and formatter
(timefmt.py), the one declaration of every figure (metrics.py), the one owner of the
results layout (paths.py), and the rank probe with the reader of its lines
(rank_probe.py, a stand-alone script).
"""
