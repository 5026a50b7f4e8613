"""MPI ping-pong: OSU-style latency and bandwidth between rank 0 and the last rank.

The app (app.py), what its ranks run (rank.py, by path), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
