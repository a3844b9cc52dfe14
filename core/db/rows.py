"""Reading model instances on hot paths without the ORM's query building: the ORM compiles
a query on every call, which on a turn's claim, or after a search's retrieval, cost several
times the read itself."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)

#: A model whose columns a read selects, and the alias they are qualified with ("": none).
Part = tuple[type[models.Model], str]


def first_row(rest: str, params: Sequence[Any], *parts: Part) -> list[Any] | None:
    """The first row that `SELECT <each part's columns> <rest>` reads, or None: an instance
    per part (None where a LEFT JOIN found no row: its primary key is NULL), then the
    values of any further columns `rest` names before its FROM, as read. The instances are
    the ones the ORM builds (the fields' own conversions applied), from one statement."""
    columns = ", ".join(_columns(model, table) for model, table in parts)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} {rest}", params)
        row = cursor.fetchone()
    if row is None:
        return None
    found: list[Any] = []
    start = 0
    for model, _table in parts:
        names, pk, converters = _loading(model)
        values = list(row[start : start + len(names)])
        start += len(names)
        for index, convert in converters:
            values[index] = convert(values[index])
        found.append(None if values[pk] is None else model.from_db(connection.alias, names, values))
    return [*found, *row[start:]]


def raw_first(model: type[M], rest: str, params: Sequence[Any], *, table: str = "") -> M | None:
    """The first instance that `SELECT <the model's columns> <rest>` reads, or None. `rest`
    goes on from the column list (its FROM, joins, WHERE, ORDER BY); `table` is the alias
    the columns are qualified with in a join."""
    row = first_row(rest, params, (model, table))
    return None if row is None else row[0]


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


@functools.cache
def _loading(
    model: type[models.Model],
) -> tuple[list[str], int, list[tuple[int, Callable[[Any], Any]]]]:
    """The model's attribute names in column order, the primary key's place among them,
    and the conversions its values need from the database (the backend's and the fields'
    own, as a compiled query applies)."""
    fields = model._meta.concrete_fields
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(model._meta.db_table)
        steps = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if steps:
            converters.append((index, functools.partial(_convert, steps, column)))
    return [f.attname for f in fields], fields.index(model._meta.pk), converters


def _convert(steps: list[Callable[..., Any]], column: Any, value: Any) -> Any:
    for step in steps:
        value = step(value, column, connection)
    return value
