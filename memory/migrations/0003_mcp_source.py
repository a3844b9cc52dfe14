"""Memory written by MCP clients: the source "mcp" and the token name beside it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0002_inferences"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="source_client",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AddField(
            model_name="memoryevent",
            name="source_client",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AlterField(
            model_name="memoryentry",
            name="source",
            field=models.CharField(
                choices=[
                    ("tool", "Chat"),
                    ("review", "Background review"),
                    ("flush", "Compression flush"),
                    ("manual", "Memory page"),
                    ("import", "Import"),
                    ("api", "REST API"),
                    ("admin", "Admin"),
                    ("mcp", "MCP"),
                ],
                default="manual",
                max_length=8,
            ),
        ),
        migrations.AlterField(
            model_name="memoryevent",
            name="source",
            field=models.CharField(
                choices=[
                    ("tool", "Chat"),
                    ("review", "Background review"),
                    ("flush", "Compression flush"),
                    ("manual", "Memory page"),
                    ("import", "Import"),
                    ("api", "REST API"),
                    ("admin", "Admin"),
                    ("mcp", "MCP"),
                ],
                max_length=8,
            ),
        ),
    ]
