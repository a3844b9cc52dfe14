"""What every app needs to own its personal data, below all of them.

registry    which tables hold personal data and how to find one person's rows (each app
            registers its tables from its ready())
serialize   rows as JSON-safe dicts (export.json, the admin's "export selected")
admin_base  the scoped admin base with the content guard (the privacy app logs accesses)
"""
