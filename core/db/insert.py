"""Writing a parent row and its child in one statement where the database allows it.

A chat turn writes the person's message and the answer that replies to it, whose parent
it is. On PostgreSQL every statement is a round trip to another process, so there the two
rows go in one INSERT; elsewhere (SQLite runs in the process) as two."""

from __future__ import annotations

from django.db import connection, models
from django.db.models.expressions import RawSQL
from django.db.models.sql import InsertQuery

# Two ids of the table's sequence, taken in order: the first row's is the smaller, as if
# it had been written first.
_IDS = (
    "WITH ids AS (SELECT nextval(pg_get_serial_sequence(%s, %s)) AS n FROM generate_series(1, 2))"
)


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
    meta = model._meta
    field = meta.get_field(link)
    first, second = RawSQL("SELECT min(n) FROM ids", ()), RawSQL("SELECT max(n) FROM ids", ())
    parent.pk, child.pk = first, second
    setattr(child, field.attname, first)
    fields = [f for f in meta.local_concrete_fields if not f.generated]
    query = InsertQuery(model)
    query.insert_values(fields, [parent, child])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [meta.pk]
    [(insert, params)] = compiler.as_sql()
    with connection.cursor() as cursor:
        cursor.execute(f"{_IDS} {insert}", [meta.db_table, meta.pk.column, *params])
        low, high = sorted(row[0] for row in cursor.fetchall())
    parent.pk, child.pk = low, high
    setattr(child, link, parent)
    for saved in (parent, child):
        saved._state.adding = False
        saved._state.db = connection.alias
