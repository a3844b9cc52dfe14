"""Which tables hold personal data, and how to find one person's rows in each.

Export ("Download my data"), account erasure, "Forget all memory", the admin's content guard
and the privacy tests all walk this registry, so a table registered here is exported and
erased without anyone touching the privacy code. Every model of the project's apps must be
either registered or declared `not_personal` (with the reason); a test enforces it, so a new
table cannot be forgotten.

Every app registers its own tables from its `AppConfig.ready()` (in its `personal_data.py`)::

    from core.privacy import registry

    registry.register(
        Inference,
        owner_path="owner",                 # ORM path from a row to its User
        section="inferences",               # key of its list in export.json
        category="Inferences about you",    # Art. 15 category shown in manifest.json
        provided=False,                     # inferred/derived: Art. 15, not Art. 20
        memory=True,                        # "Forget all memory" deletes it too
    )

From then on the table's rows appear in every export under their section, are deleted with
the account (and by "Forget all memory" when `memory=True`), and are hidden from superusers
in the admin unless content access is on. Nothing in this app has to change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, Q, QuerySet

#: What account erasure does with a registered table's rows:
#: "delete" — delete the person's rows (in `erase_order`);
#: "keep" — leave them: a SET_NULL foreign key anonymises them when the user row goes
#:          (used for records that other people need, such as the admin audit log);
#: "custom" — privacy/erase.py handles the table itself (shared, deduplicated rows).
OnErase = Literal["delete", "keep", "custom"]


@dataclass(frozen=True)
class PersonalData:
    model: type[Model]
    #: ORM path from a row to the User it belongs to ("owner", "session__owner", "user").
    owner_path: str
    #: Key of the model's list in export.json; "" when another section nests its rows
    #: (messages inside conversations, skill files inside skills).
    section: str
    #: The category named in the Art. 15 information sheet (manifest.json).
    category: str
    #: Art. 20: the person provided it (portable). False: observed, inferred or derived.
    provided: bool = True
    #: Personal *content* (text the person or the agent wrote): hidden from superusers in
    #: the admin unless HERMES_ADMIN_CONTENT_ACCESS is on. Account records (tokens,
    #: quotas) are False.
    content: bool = True
    #: Deleted by "Forget all memory".
    memory: bool = False
    on_erase: OnErase = "delete"
    #: Lower numbers are erased first (children before parents where no cascade exists).
    erase_order: int = 100
    #: Turns one row into a JSON-safe dict; default: every concrete field
    #: (see core.privacy.serialize.row_dict).
    serialize: Callable[[Model], dict[str, Any]] | None = None

    @property
    def label(self) -> str:
        return self.model._meta.label

    def rows(self, user: AbstractBaseUser | int) -> QuerySet:
        """This person's rows (a join path over a to-many relation may repeat a row)."""
        user_id = user if isinstance(user, int) else user.pk
        qs = self.model._default_manager.filter(**{f"{self.owner_path}__pk": user_id})
        return qs.distinct() if "__" in self.owner_path else qs

    def owner_q(self, user: AbstractBaseUser) -> Q:
        return Q(**{self.owner_path: user})


_lock = threading.Lock()
_entries: dict[str, PersonalData] = {}
_not_personal: dict[str, str] = {}


def register(
    model: type[Model],
    *,
    owner_path: str,
    section: str,
    category: str,
    provided: bool = True,
    content: bool = True,
    memory: bool = False,
    on_erase: OnErase = "delete",
    erase_order: int = 100,
    serialize: Callable[[Model], dict[str, Any]] | None = None,
) -> None:
    """Declare `model` as holding personal data. Registering the same model again replaces
    the entry."""
    entry = PersonalData(
        model=model,
        owner_path=owner_path,
        section=section,
        category=category,
        provided=provided,
        content=content,
        memory=memory,
        on_erase=on_erase,
        erase_order=erase_order,
        serialize=serialize,
    )
    with _lock:
        _entries[entry.label] = entry
        _not_personal.pop(entry.label, None)


def not_personal(model: type[Model], *, reason: str) -> None:
    """Declare that `model` holds nothing about a person (the reason is for reviewers)."""
    with _lock:
        if model._meta.label not in _entries:
            _not_personal[model._meta.label] = reason


def entries() -> list[PersonalData]:
    """Every registered table, in erase order."""
    with _lock:
        items = list(_entries.values())
    return sorted(items, key=lambda e: (e.erase_order, e.label))


def entry_for(model: type[Model]) -> PersonalData | None:
    return _entries.get(model._meta.label)


def is_content(model: type[Model]) -> bool:
    entry = entry_for(model)
    return entry is not None and entry.content


def declared_not_personal() -> dict[str, str]:
    with _lock:
        return dict(_not_personal)
