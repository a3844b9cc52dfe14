"""Settings for Hermes Web, read from the environment (and an optional `.env`).

Safe by default: DEBUG is off, ALLOWED_HOSTS lists loopback only, and a secret key is
generated once into `var/` when none is given.

One module per topic; each reads its environment variables through `declare`, which
records the type, default, bounds and meaning of every one (the README's configuration
tables are checked against that registry). The topics are imported in the order below —
later ones build on earlier ones (database and privacy use core's VAR_DIR) — and their
upper-case names make up `django.conf.settings`. A name may be defined by one topic only.
"""

from __future__ import annotations

from types import ModuleType

from django.core.exceptions import ImproperlyConfigured

from . import chat, core, database, deployment, llm, memory, privacy, search, signin

topics: tuple[ModuleType, ...] = (
    core,
    database,
    deployment,
    signin,
    llm,
    chat,
    search,
    memory,
    privacy,
)


def _assemble(topics: tuple[ModuleType, ...]) -> dict[str, object]:
    found: dict[str, object] = {}
    owner: dict[str, str] = {}
    for topic in topics:
        for name, value in vars(topic).items():
            if not name.isupper() or name.startswith("_"):
                continue
            # The same object re-exported (`from .core import VAR_DIR`) is no conflict.
            if name in found and found[name] is not value:
                raise ImproperlyConfigured(
                    f"{name} is set by both {owner[name]} and {topic.__name__}."
                )
            found[name] = value
            owner.setdefault(name, topic.__name__)
    return found


globals().update(_assemble(topics))
