"""Users own their data: what the system holds about a person, across every app.

registry       which tables hold personal data and how to find one person's rows
registrations  the registry entries of the apps that exist today
serialize      rows as JSON-safe dicts (export.json, the admin's "export selected")
statedb        Hermes' state.db schema: write one (export), read one (import)
export         the "Download my data" zip: manifest, export.json, a Hermes home
jobs           export jobs (Celery, progress, expiry) and the synchronous small export
erase          account deletion and "forget all memory", and the storage scrub after
hermes_import  importing a Hermes home (state.db, MEMORY.md, USER.md, SOUL.md, skills)
admin_access   the admin's content guard and its audit log
"""
