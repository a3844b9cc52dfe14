"""The Celery application. Broker and result backend come from Django settings."""

from __future__ import annotations

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")

app = Celery("hermes_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_process_init.connect
@signals.worker_ready.connect
def _recover_leases(**_kwargs: object) -> None:
    """A worker (or a pool child replacing a killed one) releases the leases of this host's
    dead processes, so redelivered tasks take their work over at once."""
    from core.leases import recover_on_startup

    recover_on_startup("worker")
