"""LAMMPS twin of the HOOMD-blue WCA benchmark.

The app (app.py), what its ranks run (the LAMMPS executable on wca.in), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
