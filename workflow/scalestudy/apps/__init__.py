"""The apps scalestudy can measure: one folder per app, found by the registry.

An app is a folder `apps/<pkg>/` (pkg: the app's name with '-' as '_'): `app.py` (its App
subclass: parameters, figures, the command its ranks run, how its output reads), its rank
program (`rank.py`, or the package `rank/`), `env.yaml` (its conda environment for `--sdm
conda`), `README.md` (its page) and any module only it uses. Modules several apps share stay
here: `base.py` (App, Param, ParseError), `md.py`, `osu.py`, `saved_bytes.py`, `tensor_peak.py`.
`registry.py` imports every `apps/<pkg>/app.py` and holds APPS.

This file imports nothing, and neither does any app folder's `__init__.py`: a rank program
started as `python -m scalestudy.apps.<pkg>.rank` loads the packages around it and no other
app's module (tests/integration/test_rank_programs.py).
"""
