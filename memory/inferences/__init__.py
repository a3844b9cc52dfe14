"""Inferences: what the local memory provider (memory/providers/local.py) believes about
its user, derived from conversations by the summary model, and everything a person can do
about them.

    config      the provider's settings schema (edited in the admin) and their values
    guard       normalising statements; the write-path gate (threat scan, imperative text)
    selectors   reads: consent, a person's inferences, provider configuration
    services    writes: store extracted candidates, correct, feedback, delete, consent
    extraction  the extractor prompt, its validated JSON, and the Celery task's body
    recall      ranking, the per-conversation recall row, and what a turn is sent
    apis/views  the REST API (/api/inferences/) and the Inferences page (/inferences/)
    admin       inferences and the memory provider configuration form
    privacy     registration with privacy (export, erasure, admin guard)
    registrations  called from MemoryConfig.ready(): admin and privacy

Everything is keyed by the logged-in user: the provider is told the user by the server
(never by the model), and every query filters on that owner.
"""
