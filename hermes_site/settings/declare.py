"""Declaring a setting once: its environment variable, type, default, bounds and meaning.

Each topic module of this package reads its settings through these functions and nothing
else, so every variable a deployment may set is in `REGISTRY` (which the README test
compares with the configuration tables), and a bad value stops startup with one message
naming the variable instead of a traceback from deep inside Django or Celery.

Parsing is django-environ's (booleans accept true/on/yes/1, lists are comma-separated,
`$OTHER` refers to another variable), so values mean what they meant before.
"""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import environ
from django.core.exceptions import ImproperlyConfigured

Kind = Literal["str", "bool", "int", "float", "list", "json", "path"]

PROJECT_DIR = Path(__file__).resolve().parents[2]

_env = environ.Env()
# Read before any declaration: a `.env` fills in what the real environment leaves unset.
# It is optional: read_env would log "not found" on every start without one.
if (PROJECT_DIR / ".env").is_file():
    environ.Env.read_env(PROJECT_DIR / ".env", overwrite=False)


@dataclass(frozen=True)
class Setting:
    """One environment variable. `default_doc` describes a default that is derived (from
    another setting or generated) rather than a literal; the README states it in words."""

    name: str
    kind: Kind
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    clamp: bool = False
    choices: tuple[str, ...] = ()
    default_doc: str = ""
    #: The topic module that declares it.
    module: str = field(default="", compare=False)


#: Every declared setting by variable name, in declaration order.
REGISTRY: dict[str, Setting] = {}


def _register(setting: Setting) -> Setting:
    # Called from declare_*, called from the topic module.
    module = sys._getframe(2).f_globals.get("__name__", "")
    setting = replace(setting, module=module)
    earlier = REGISTRY.get(setting.name)
    # The same module may run twice: manage.py imports the settings again after a first
    # attempt failed (with a bad value), and that error must stay the one reported.
    if earlier is not None and earlier.module != module:
        raise ImproperlyConfigured(
            f"{setting.name} is declared in both {earlier.module} and {module}."
        )
    REGISTRY[setting.name] = setting
    return setting


def _read(setting: Setting, reader: Any, expected: str) -> Any:
    try:
        value = reader(setting.name, default=setting.default)
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            f"{setting.name} must be {expected} (got {os.environ.get(setting.name)!r})."
        ) from None
    # Callers may extend what they get (ALLOWED_HOSTS gains the public host): never hand
    # out the registry's own default.
    return copy.deepcopy(value)


def _bounded(setting: Setting, value: float) -> Any:
    low, high = setting.min, setting.max
    if setting.clamp:
        if low is not None and value < low:
            return type(value)(low)
        if high is not None and value > high:
            return type(value)(high)
        return value
    if low is not None and value < low:
        raise ImproperlyConfigured(f"{setting.name} must be at least {low} (got {value}).")
    if high is not None and value > high:
        raise ImproperlyConfigured(f"{setting.name} must be at most {high} (got {value}).")
    return value


def declare_str(
    name: str, default: str, *, help: str, choices: tuple[str, ...] = (), default_doc: str = ""
) -> str:
    setting = _register(
        Setting(name, "str", default, help, choices=choices, default_doc=default_doc)
    )
    value: str = _read(setting, _env.str, "text")
    if choices and value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)} (got {value!r}).")
    return value


def declare_bool(name: str, default: bool, *, help: str, default_doc: str = "") -> bool:
    setting = _register(Setting(name, "bool", default, help, default_doc=default_doc))
    return bool(_read(setting, _env.bool, "true or false"))


def declare_int(
    name: str,
    default: int,
    *,
    help: str,
    min: int | None = None,
    max: int | None = None,
    clamp: bool = False,
) -> int:
    """An integer; outside `min`..`max` it is refused, or with `clamp` brought inside."""
    setting = _register(Setting(name, "int", default, help, min=min, max=max, clamp=clamp))
    return int(_bounded(setting, _read(setting, _env.int, "a whole number")))


def declare_float(
    name: str, default: float, *, help: str, min: float | None = None, max: float | None = None
) -> float:
    setting = _register(Setting(name, "float", default, help, min=min, max=max))
    return float(_bounded(setting, _read(setting, _env.float, "a number")))


def declare_list(name: str, default: list[str], *, help: str) -> list[str]:
    """Comma-separated values (empty ones dropped)."""
    setting = _register(Setting(name, "list", default, help))
    return list(_read(setting, _env.list, "a comma-separated list"))


def declare_json(name: str, default: dict[str, Any], *, help: str) -> dict[str, Any]:
    """A JSON object."""
    setting = _register(Setting(name, "json", default, help))
    value = _read(setting, _env.json, "JSON")
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object (got {type(value).__name__}).")
    return value


def declare_path(name: str, default: Path, *, help: str, default_doc: str) -> Path:
    """A folder or file; relative paths are taken from the working directory."""
    setting = _register(Setting(name, "path", default, help, default_doc=default_doc))
    return Path(_read(setting, _env.str, "a path")).resolve()
