from __future__ import annotations

from django.contrib import admin

from hermes_site.admin_base import OwnedModelAdmin

from .models import ApiToken, Profile


@admin.register(Profile)
class ProfileAdmin(OwnedModelAdmin):
    owner_field = "user"
    list_display = ("user", "memory_enabled", "memory_write_approval")

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        # Profiles are created with their user.
        return request.user.is_superuser


@admin.register(ApiToken)
class ApiTokenAdmin(OwnedModelAdmin):
    owner_field = "user"
    list_display = ("name", "user", "prefix", "created_at", "last_used_at")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        # Keys are shown once, on the account page; the admin cannot display them.
        return False
