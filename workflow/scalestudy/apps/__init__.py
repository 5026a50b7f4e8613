"""The apps scalestudy can measure. Adding an app: one module here + one rule."""

from .base import App, Metric, Param, ParseError
from .litgpt import LitGPT
from .pingpong import PingPong

APPS: dict[str, App] = {app.name: app for app in (LitGPT(), PingPong())}

__all__ = ["APPS", "App", "Metric", "Param", "ParseError"]
