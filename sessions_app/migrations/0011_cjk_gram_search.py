"""A ranked index for CJK text: the bigrams of every message with CJK characters (and the
character alone where a CJK run ends), so 2-character Chinese words are ranked like any
other word. SQLite: the contentless FTS5 table `messages_fts_cjk` fed by triggers (and
its helper table of positions); PostgreSQL: a stored `cjk_vector` tsvector with a GIN
index, computed by the immutable function `hermes_cjk_grams`. See _fts_sql for the how.

Both build from the rows already there and reverse by dropping what they added.
"""

from django.db import migrations

from ._fts_sql import (
    POSTGRES_CJK_FORWARD,
    POSTGRES_CJK_REVERSE,
    SQLITE_CJK_FORWARD,
    SQLITE_CJK_REVERSE,
    VendorRunSQL,
)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0010_stemmed_and_title_search")]

    operations = [
        VendorRunSQL("sqlite", SQLITE_CJK_FORWARD, SQLITE_CJK_REVERSE),
        VendorRunSQL("postgresql", POSTGRES_CJK_FORWARD, POSTGRES_CJK_REVERSE),
    ]
