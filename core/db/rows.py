"""Reading model instances through `Model.objects.raw()` on hot paths: the ORM compiles a
query on every call, which on a turn's claim cost several times the read itself."""

from __future__ import annotations

import functools

from django.db import connection, models


@functools.cache
def model_columns(model: type[models.Model], table: str = "") -> str:
    """The model's own columns, for a raw SELECT that builds its instances: named, not `*`,
    so columns the database keeps for itself (PostgreSQL's generated search vectors) are not
    read. `table` qualifies each one (an alias in a join)."""
    prefix = f"{table}." if table else ""
    quote = connection.ops.quote_name
    return ", ".join(prefix + quote(f.column) for f in model._meta.concrete_fields)
