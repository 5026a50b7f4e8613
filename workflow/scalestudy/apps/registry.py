"""The registry of apps, filled by discovery: importing this module imports every app folder's
`app.py` (each subpackage of scalestudy.apps is an app), and each app's App subclass enters
APPS as it is defined (base.App.__init_subclass__). The rules, the sweep checks, the versions
every run records and the analysis import APPS, app_for, app_of and app_of_row from here.

`app.py` modules import only the standard library at their top (heavy packages inside the
functions that need them; tests/unit/test_light_imports.py holds every module outside
RANK_ONLY to it), so discovering them costs no start-up time and the runner starts in an
environment holding only its app's packages (its env.yaml: no torch where the app is LAMMPS).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .base import APPS, App, Param, ParseError, app_for, app_of, app_of_row

PACKAGE = __package__ or "scalestudy.apps"
APPS_DIR = Path(__file__).resolve().parent
# The module of an app folder that defines its App subclass.
APP_MODULE = "app"
# An app folder's own Snakemake rules (the inputs the workflow makes for its points), if any:
# the Snakefile includes each app's, found here.
RULES_FILE = "rules.smk"

# Loaded only inside a rank (they import torch at their top): never by discovery, planning,
# the runner or the status command. Paths under apps/, without `.py`.
RANK_ONLY = frozenset({"tensor_peak", "torch_parallel/rank"})


def app_packages() -> list[str]:
    """The app folders: every subpackage of scalestudy.apps."""
    return sorted(module.name for module in pkgutil.iter_modules([str(APPS_DIR)]) if module.ispkg)


def rules_files() -> list[str]:
    """Every app folder's rules file (apps/<pkg>/rules.smk), in the order of the folders."""
    found = [APPS_DIR / package / RULES_FILE for package in app_packages()]
    return [str(path) for path in found if path.is_file()]


def discover() -> None:
    """Import every app folder's app.py; a folder without one is an error, named."""
    for package in app_packages():
        if not (APPS_DIR / package / f"{APP_MODULE}.py").is_file():
            raise ImportError(f"app folder apps/{package}/ has no {APP_MODULE}.py (its App subclass)")
        importlib.import_module(f"{PACKAGE}.{package}.{APP_MODULE}")


discover()

__all__ = ["APPS", "App", "Param", "ParseError", "app_for", "app_of", "app_of_row", "rules_files"]
