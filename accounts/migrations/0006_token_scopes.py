"""API tokens gain scopes. Existing tokens get every scope (the REST API and all of the MCP
server), so they keep doing what they did; new ones get what the person ticks."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_profile_theme"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scopes",
            field=models.CharField(
                default="api chat memory:read memory:write search skills:read skills:write",
                max_length=200,
            ),
        ),
    ]
