"""The admin base every app uses: staff who are not superusers see and edit only their
own rows; superusers see everything."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest


class OwnedModelAdmin(admin.ModelAdmin):
    #: ORM path from the model to the user who owns a row ("owner", "session__owner", …).
    owner_field = "owner"

    def _is_staff(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def owns(self, request: HttpRequest, obj: Model) -> bool:
        return (
            type(obj)
            ._default_manager.filter(pk=obj.pk, **{self.owner_field: request.user})
            .exists()
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        qs = qs.filter(**{self.owner_field: request.user})
        return qs.distinct() if "__" in self.owner_field else qs

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if request.user.is_superuser:
            return True
        return self._is_staff(request) and (obj is None or self.owns(request, obj))

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A row that belongs to nobody yet can only be created where the owner is a field
        # of the model itself (set in save_model); nested ownership is created elsewhere.
        if request.user.is_superuser:
            return True
        return self._is_staff(request) and "__" not in self.owner_field

    def get_exclude(self, request: HttpRequest, obj: Model | None = None) -> Any:
        exclude = list(super().get_exclude(request, obj) or [])
        if not request.user.is_superuser and "__" not in self.owner_field:
            exclude.append(self.owner_field)
        return exclude

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        if not change and not request.user.is_superuser and "__" not in self.owner_field:
            setattr(obj, self.owner_field, request.user)
        super().save_model(request, obj, form, change)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # Foreign keys to owned things (a message's session, an entry's source session)
        # offer only the user's own rows.
        if not request.user.is_superuser:
            remote = db_field.remote_field.model
            related_admin = self.admin_site._registry.get(remote)
            if isinstance(related_admin, OwnedModelAdmin):
                kwargs["queryset"] = related_admin.get_queryset(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
