"""Memory provider configuration: a small JSON-Schema subset, stored per provider name in
ProviderConfig and edited in the admin with a form built from the schema.

A provider's `get_config_schema()` returns::

    {"title": "…", "properties": {
        "recall_limit": {"type": "integer", "title": "…", "description": "…",
                         "default": 5, "minimum": 0, "maximum": 20},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "api_key": {"type": "string", "secret": true},
        "enabled": {"type": "boolean", "default": true}}}

Types: boolean, integer, number, string (optionally `enum`, `secret`, `maxLength`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django import forms
from django.db import transaction
from django.utils import timezone

from core.exceptions import ServiceError

from ..models import ProviderConfig

LOCAL_SCHEMA: dict[str, Any] = {
    "title": "Local user model",
    "properties": {
        "extraction_enabled": {
            "type": "boolean",
            "title": "Infer from conversations",
            "description": "After each answer, the summary model looks for durable facts about "
            "the person. Off: nothing new is inferred (recall still works).",
            "default": True,
        },
        "recall_limit": {
            "type": "integer",
            "title": "Inferences recalled per message",
            "description": "At most this many inferences are sent with a message (0: none).",
            "default": 5,
            "minimum": 0,
            "maximum": 20,
        },
        "min_trust": {
            "type": "number",
            "title": "Lowest trust recalled",
            "description": "Inferences whose trust fell below this (after 'not helpful' "
            "feedback) are no longer recalled.",
            "default": 0.3,
            "minimum": 0,
            "maximum": 1,
        },
        "min_confidence": {
            "type": "number",
            "title": "Lowest confidence kept",
            "description": "Extracted inferences the model is less sure of are dropped.",
            "default": 0.5,
            "minimum": 0,
            "maximum": 1,
        },
        "max_per_turn": {
            "type": "integer",
            "title": "New inferences per extraction",
            "default": 5,
            "minimum": 1,
            "maximum": 10,
        },
    },
}


def _properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return {k: v for k, v in (props or {}).items() if isinstance(v, dict)}


def schema_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: spec.get("default") for k, spec in _properties(schema).items()}


def _clean_value(key: str, spec: dict[str, Any], value: Any) -> Any:
    kind = spec.get("type", "string")
    label = spec.get("title") or key
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ServiceError("invalid", f"{label}: must be true or false.", field=key)
        return value
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ServiceError("invalid", f"{label}: must be a number.", field=key)
        if kind == "integer" and (not float(value).is_integer()):
            raise ServiceError("invalid", f"{label}: must be a whole number.", field=key)
        if not math.isfinite(value):
            raise ServiceError("invalid", f"{label}: must be a number.", field=key)
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ServiceError("invalid", f"{label}: must be between {low} and {high}.", field=key)
        return int(value) if kind == "integer" else float(value)
    if not isinstance(value, str):
        raise ServiceError("invalid", f"{label}: must be text.", field=key)
    if spec.get("enum") and value not in spec["enum"]:
        raise ServiceError("invalid", f"{label}: must be one of {spec['enum']}.", field=key)
    if len(value) > int(spec.get("maxLength", 2000)):
        raise ServiceError("invalid", f"{label}: too long.", field=key)
    return value


def clean_values(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Validate `values` against the schema; unknown keys are refused, missing ones left
    out (their defaults apply)."""
    if not isinstance(values, dict):
        raise ServiceError("invalid", "The configuration must be an object.")
    props = _properties(schema)
    unknown = sorted(set(values) - set(props))
    if unknown:
        raise ServiceError("invalid", f"Unknown setting(s): {', '.join(unknown)}.")
    return {k: _clean_value(k, props[k], v) for k, v in values.items() if v is not None}


def provider_config_get(*, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The provider's effective settings: schema defaults, overridden by stored values that
    still validate (a value made invalid by a newer schema falls back to its default)."""
    values = schema_defaults(schema)
    stored = ProviderConfig.objects.filter(name=name).values_list("values", flat=True).first()
    props = _properties(schema)
    for key, value in (stored or {}).items():
        if key in props:
            try:
                values[key] = _clean_value(key, props[key], value)
            except ServiceError:
                pass
    return values


def provider_config_save(
    *, name: str, schema: dict[str, Any], values: dict[str, Any]
) -> ProviderConfig:
    cleaned = clean_values(schema, values)
    with transaction.atomic():
        config, _ = ProviderConfig.objects.select_for_update().get_or_create(name=name)
        # A secret left blank in the form keeps its stored value.
        for key, spec in _properties(schema).items():
            if spec.get("secret") and not cleaned.get(key) and key in config.values:
                cleaned[key] = config.values[key]
        config.values = cleaned
        config.updated_at = timezone.now()
        config.save(update_fields=["values", "updated_at"])
    return config


def form_fields(schema: dict[str, Any]) -> dict[str, forms.Field]:
    """Django form fields for the schema's properties (the admin's configuration form)."""
    fields: dict[str, forms.Field] = {}
    for key, spec in _properties(schema).items():
        kind = spec.get("type", "string")
        common = {
            "label": spec.get("title") or key.replace("_", " ").capitalize(),
            "help_text": spec.get("description", ""),
            "required": False,
        }
        if kind == "boolean":
            fields[key] = forms.BooleanField(**common)
        elif kind == "integer":
            fields[key] = forms.IntegerField(
                min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common
            )
        elif kind == "number":
            fields[key] = forms.FloatField(
                min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common
            )
        elif spec.get("enum"):
            fields[key] = forms.ChoiceField(choices=[(v, v) for v in spec["enum"]], **common)
        elif spec.get("secret"):
            fields[key] = forms.CharField(
                widget=forms.PasswordInput(render_value=False),
                max_length=int(spec.get("maxLength", 2000)),
                **common,
            )
        else:
            fields[key] = forms.CharField(max_length=int(spec.get("maxLength", 2000)), **common)
    return fields


@dataclass(frozen=True)
class LocalConfig:
    extraction_enabled: bool
    recall_limit: int
    min_trust: float
    min_confidence: float
    max_per_turn: int


def local_config() -> LocalConfig:
    values = provider_config_get(name="local", schema=LOCAL_SCHEMA)
    return LocalConfig(
        extraction_enabled=bool(values["extraction_enabled"]),
        recall_limit=int(values["recall_limit"]),
        min_trust=float(values["min_trust"]),
        min_confidence=float(values["min_confidence"]),
        max_per_turn=int(values["max_per_turn"]),
    )
