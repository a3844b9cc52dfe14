from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0005_compression_lineage_fields"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="temporary",
            field=models.BooleanField(default=False),
        ),
    ]
