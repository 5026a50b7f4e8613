"""Any program as an app, declared in the sweep (`app: command`).

The app (app.py), what its ranks run (the study's own command), its conda environment (env.yaml)
and its page (README.md). Nothing is imported here: a rank program started with `python -m`
loads only this docstring of the package around it.
"""
