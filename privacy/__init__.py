"""Users own their data: what the system holds about a person, across every app.

The registry of personal data, the row serializer and the admin's content guard sit below
every app in core/privacy/; this app reads every app's data through them and their services.

statedb        Hermes' state.db schema: write one (export), read one (import)
export         the "Download my data" zip: manifest, export.json, a Hermes home
jobs           export jobs (Celery, progress, expiry) and the synchronous small export
erase          account deletion and "forget all memory", and the storage scrub after
hermes_import  importing a Hermes home (state.db, MEMORY.md, USER.md, SOUL.md, skills)
admin_access   the audit log of the admin's content guard
"""
