"""Collectives and point-to-point communication over message sizes (OSU's protocol, nccl-tests' sizes).

The app (app.py), what its ranks run (rank.py, by path), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
