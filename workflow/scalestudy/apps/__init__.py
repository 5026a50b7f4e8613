"""The apps scalestudy can measure, in a registry that fills itself.

Adding an app is one module in this package (a subclass of App with a `name`) and its
conda environment `envs/<name>.yaml`; importing this package imports every module in it,
and the app's class enters APPS as it is defined. The rules, the sweep checks, the
versions every run records and the analysis all read APPS. Modules here import only
the standard library at their top (the rank programs import their heavy packages
inside functions), so discovering them costs no start-up time.
"""

import importlib
import pkgutil

from .base import APPS, App, Param, ParseError, app_for, app_of, app_of_row

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["APPS", "App", "Param", "ParseError", "app_for", "app_of", "app_of_row"]
