"""Called from MemoryConfig.ready(): the inference admin and privacy registrations."""

from __future__ import annotations


def register_all() -> None:
    from django.contrib import admin

    from . import admin as inference_admin
    from . import personal_data

    inference_admin.register(admin.site)
    personal_data.register()
