"""Distributed training in plain PyTorch under mpirun (ddp, fsdp, pipeline, tensor, hybrid).

The app (app.py), what its ranks run (the package rank/, with `python -m`), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
