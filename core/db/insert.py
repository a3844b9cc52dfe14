"""Writing a parent row and its child in one statement where the database allows it.

A chat turn writes the person's message and the answer that replies to it, whose parent
it is. On PostgreSQL every statement is a round trip to another process, so there the two
rows go in one INSERT; elsewhere (SQLite runs in the process) as two."""

from __future__ import annotations

import functools

from django.db import connection, models

# The first row's id is the smaller of two ids of the table's sequence, taken in order, as
# if it had been written first; the child's is the larger, and its link is the first's.
_FIRST, _SECOND = "(SELECT min(n) FROM ids)", "(SELECT max(n) FROM ids)"


def insert_with_child(parent: models.Model, child: models.Model, *, link: str) -> None:
    """INSERT `parent`, then `child` with its foreign key `link` pointing at `parent`, both
    with their defaults and primary keys set as `save()` leaves them (no signals are sent:
    the models this writes have no receivers).

    Precondition: both unsaved instances of one model with an automatic primary key."""
    if connection.vendor != "postgresql":
        parent.save(force_insert=True)
        setattr(child, link, parent)
        child.save(force_insert=True)
        return
    model = type(parent)
    sql, parent_fields, child_fields = _pair_insert(model, link)
    params = [_value(f, parent) for f in parent_fields] + [_value(f, child) for f in child_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        low, high = sorted(row[0] for row in cursor.fetchall())
    parent.pk, child.pk = low, high
    setattr(child, link, parent)
    for saved in (parent, child):
        saved._state.adding = False
        saved._state.db = connection.alias


@functools.cache
def _pair_insert(
    model: type[models.Model], link: str
) -> tuple[str, list[models.Field], list[models.Field]]:
    """The statement of `insert_with_child` for `model` (built once: the ORM compiled an
    InsertQuery on every turn, which took longer than the INSERT), and the fields whose
    values each row binds, in order."""
    meta = model._meta
    quote = connection.ops.quote_name
    table, pk, linked = meta.db_table, meta.pk, meta.get_field(link)
    fields = [f for f in meta.local_concrete_fields if not f.generated]
    parent_fields = [f for f in fields if f is not pk]
    child_fields = [f for f in parent_fields if f is not linked]
    first = ", ".join(_FIRST if f is pk else "%s" for f in fields)
    second = ", ".join(_SECOND if f is pk else _FIRST if f is linked else "%s" for f in fields)
    sequence = f"pg_get_serial_sequence('{table}', '{pk.column}')"
    sql = (
        f"WITH ids AS (SELECT nextval({sequence}) AS n FROM generate_series(1, 2))"  # noqa: S608 - the model's own names
        f" INSERT INTO {quote(table)} ({', '.join(quote(f.column) for f in fields)})"
        f" VALUES ({first}), ({second}) RETURNING {quote(pk.column)}"
    )
    return sql, parent_fields, child_fields


def _value(field: models.Field, instance: models.Model) -> object:
    """What an INSERT binds for `field` of `instance`, as the ORM's compiler prepares it."""
    return field.get_db_prep_save(field.pre_save(instance, add=True), connection=connection)
