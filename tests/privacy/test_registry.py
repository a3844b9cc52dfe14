"""Every table of the project is either registered as personal data (so it is exported and
erased) or declared not personal, with a reason — a new table cannot be forgotten."""

from __future__ import annotations

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist

from core.privacy import registry

OUR_APPS = {"core", "accounts", "sessions_app", "memory", "skills_app", "privacy", "usage"}


def test_every_model_of_our_apps_is_registered_or_declared_not_personal():
    registered = {e.label for e in registry.entries()}
    exempt = registry.declared_not_personal()
    forgotten = [
        m._meta.label
        for m in apps.get_models()
        if m._meta.app_label in OUR_APPS
        and m._meta.label not in registered
        and m._meta.label not in exempt
    ]
    assert forgotten == [], (
        "Register these in their app's personal_data.py (registry.register) or declare them "
        f"registry.not_personal(..., reason=...): {forgotten}"
    )
    assert all(reason for reason in exempt.values())


def test_every_owner_path_leads_to_the_user_model():
    user_model = apps.get_model("auth", "User")
    for entry in registry.entries():
        model = entry.model
        for part in entry.owner_path.split("__"):
            try:
                field = model._meta.get_field(part)
            except FieldDoesNotExist as exc:  # pragma: no cover - the assertion message
                raise AssertionError(f"{entry.label}: bad owner_path {entry.owner_path}") from exc
            model = field.related_model
        assert model is user_model, entry.label


def test_sections_are_unique():
    sections = [e.section for e in registry.entries() if e.section]
    assert len(sections) == len(set(sections))
