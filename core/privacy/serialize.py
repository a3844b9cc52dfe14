"""Rows as JSON-safe dicts, for export.json and the admin's "export selected" action."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from django.db.models import Model


def json_value(value: Any) -> Any:
    """A field value in a form `json.dumps` accepts and a person can read."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview | bytearray):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def row_dict(obj: Model, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every concrete field of the row (foreign keys as `<name>_id`) and the ids of its
    many-to-many relations (`<name>_ids`: an inference's evidence messages, the entries a
    memory snapshot showed)."""
    data: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.name in exclude:
            continue
        data[field.attname] = json_value(getattr(obj, field.attname))
    for field in obj._meta.many_to_many:
        if field.name not in exclude:
            data[f"{field.name}_ids"] = sorted(
                json_value(pk) for pk in getattr(obj, field.name).values_list("pk", flat=True)
            )
    return data
