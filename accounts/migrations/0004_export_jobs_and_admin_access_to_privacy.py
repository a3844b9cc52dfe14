from django.db import migrations


class Migration(migrations.Migration):
    """ExportJob and AdminContentAccess moved to the privacy app; their tables stay as they
    are (privacy's 0001 takes them over with the same db_table), so only the state
    changes."""

    dependencies = [
        ("accounts", "0003_export_jobs_and_admin_content_access"),
        ("privacy", "0001_export_jobs_and_admin_access_from_accounts"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="AdminContentAccess"),
                migrations.DeleteModel(name="ExportJob"),
            ],
            database_operations=[],
        ),
    ]
