"""HOOMD-blue's WCA fluid benchmark (hoomd-benchmarks' md_pair_wca), strong or weak scaling.

The app (app.py), what its ranks run (rank.py, with `python -m`), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
