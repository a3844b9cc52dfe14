"""Memory learned from an imported ChatGPT/Claude history: the source "import_review" (its
`source_client` is the import's id), with room for it in `source` (8 → 16 characters).

On SQLite, altering the columns rebuilds both tables: the rebuild of the entry table drops
the trigger of 0004_entry_release, and the trigger (which names the event table) would stop
the event table's. So the trigger is dropped before the rebuilds and created after them, in
both directions. Reversing first turns the new source back into "review" (what these notes
were recorded as before), so the narrower column holds every value."""

from importlib import import_module

from django.db import migrations, models

from sessions_app.migrations._fts_sql import VendorRunSQL

_release = import_module("memory.migrations.0004_entry_release")
DROP_TRIGGER = _release.SQLITE_REVERSE
CREATE_TRIGGER = [*_release.SQLITE_REVERSE, *_release.SQLITE_FORWARD]

SOURCES_BEFORE = [
    ("tool", "Chat"),
    ("review", "Background review"),
    ("flush", "Compression flush"),
    ("manual", "Memory page"),
    ("import", "Import"),
    ("api", "REST API"),
    ("admin", "Admin"),
    ("mcp", "MCP"),
]
SOURCES = [*SOURCES_BEFORE, ("import_review", "Learned from imported history")]


def import_review_to_review(apps, schema_editor):
    for name in ("MemoryEntry", "MemoryEvent"):
        model = apps.get_model("memory", name)
        model.objects.filter(source="import_review").update(source="review", source_client="")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0004_entry_release"),
    ]

    operations = [
        VendorRunSQL("sqlite", DROP_TRIGGER, CREATE_TRIGGER),
        migrations.AlterField(
            model_name="memoryentry",
            name="source",
            field=models.CharField(choices=SOURCES, default="manual", max_length=16),
        ),
        migrations.AlterField(
            model_name="memoryevent",
            name="source",
            field=models.CharField(choices=SOURCES, max_length=16),
        ),
        VendorRunSQL("sqlite", CREATE_TRIGGER, DROP_TRIGGER),
        migrations.RunPython(migrations.RunPython.noop, import_review_to_review),
    ]
