"""Reading model instances through `Model.objects.raw()` on hot paths: the ORM compiles a
query on every call, which on a turn's claim, or after a search's retrieval, cost several
times the read itself."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def raw_first(model: type[M], rest: str, params: Sequence[Any], *, table: str = "") -> M | None:
    """The first instance that `SELECT <the model's columns> <rest>` reads, or None. `rest`
    goes on from the column list (its FROM, joins, WHERE, ORDER BY); `table` is the alias
    the columns are qualified with in a join. The same instance the ORM builds, without
    compiling a query."""
    rows = model._default_manager.raw(f"SELECT {_columns(model, table)} {rest}", params)
    return next(iter(rows), None)


def raw_all(
    model: type[M], rest: str, params: Sequence[Any], *, fields: tuple[str, ...] = ()
) -> list[M]:
    """Every instance that `SELECT <columns> <rest>` reads: the model's own columns, or
    only those of `fields` (the primary key among them; the others are deferred)."""
    return list(model._default_manager.raw(f"SELECT {_columns(model, '', fields)} {rest}", params))


def marks(values: Sequence[Any]) -> str:
    """One placeholder per value, for `IN (…)` (an empty list has no valid IN)."""
    if not values:
        raise ValueError("IN () is not valid SQL: check for no values first")
    return ", ".join(["%s"] * len(values))


@functools.cache
def _columns(model: type[models.Model], table: str, fields: tuple[str, ...] = ()) -> str:
    """The model's own columns (or those of `fields`), named rather than `*`, so columns the
    database keeps for itself (PostgreSQL's generated search vectors) are not read."""
    prefix = f"{table}." if table else ""
    quote = connection.ops.quote_name
    chosen = [model._meta.get_field(f) for f in fields] or model._meta.concrete_fields
    return ", ".join(prefix + quote(f.column) for f in chosen)
