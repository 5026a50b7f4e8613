"""LitGPT fine-tuning (full and LoRA) through the stock `litgpt` CLI under mpirun.

The app (app.py), what its ranks run (rank.py, with `python -m`), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
