"""The apps scalestudy can measure, in a registry that fills itself.

Adding an app is one module in this package (a subclass of App with a `name`) and its
conda environment `envs/<name>.yaml`; importing this package imports every module in it
but the rank-only ones (RANK_ONLY), and the app's class enters APPS as it is defined. The
rules, the sweep checks, the versions every run records and the analysis all read APPS.
Modules here import only the standard library at their top (the rank programs import their
heavy packages inside functions; tests/unit/test_light_imports.py holds every module outside
RANK_ONLY to it), so discovering them costs no start-up time and the runner starts in an
environment holding only its app's packages (envs/<name>.yaml: no torch where the app is
LAMMPS).
"""

import importlib
import pkgutil

from .base import APPS, App, Param, ParseError, app_for, app_of, app_of_row

# Loaded only inside a rank (they import torch at their top): never by discovery, planning,
# the runner or the status command.
RANK_ONLY = frozenset({"tensor_peak", "torch_parallel_rank"})

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in RANK_ONLY:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["APPS", "App", "Param", "ParseError", "app_for", "app_of", "app_of_row"]
