"""The admin base every app uses: staff who are not superusers see and edit only their
own rows. Superusers manage accounts and see counts, but other people's *content* (tables
registered as content in core/privacy/registry.py) stays hidden from them unless the
deployment sets HERMES_ADMIN_CONTENT_ACCESS=true — and then every list, view, deletion and
export of someone else's content is announced by `content_accessed`, which the privacy app
writes to its audit log (privacy.models.AdminContentAccess)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Model, Q, QuerySet
from django.dispatch import Signal
from django.http import HttpRequest, HttpResponse
from django.utils.formats import number_format
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from .registry import entry_for, is_content
from .serialize import row_dict

#: Sent for every list, view, deletion or export of someone else's content, with
#: ``viewer``, ``subject_id`` (None for a list of several people's rows), ``action``,
#: ``model`` (label), ``object_id``, ``rows`` and ``path``. The privacy app records it.
content_accessed = Signal()


def _content_access() -> bool:
    return settings.HERMES_ADMIN_CONTENT_ACCESS


class OwnedModelAdmin(admin.ModelAdmin):
    #: ORM path from the model to the user who owns a row ("owner", "session__owner", …).
    owner_field = "owner"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Subclasses that widen get_queryset (team skills, lockouts) must not widen it past
        # the content guard: wrap their own get_queryset so the guard always applies last.
        own = cls.__dict__.get("get_queryset")
        if own is not None and not getattr(own, "_content_guarded", False):

            def get_queryset(self: OwnedModelAdmin, request: HttpRequest) -> QuerySet:
                return self.guard_content(request, own(self, request))

            get_queryset._content_guarded = True
            get_queryset.__doc__ = own.__doc__
            cls.get_queryset = get_queryset

    def _is_staff(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    # --- content guard ------------------------------------------------------------------

    def is_content(self) -> bool:
        return is_content(self.model)

    def content_hidden(self, request: HttpRequest) -> bool:
        """True for a superuser while other people's content is off limits."""
        return request.user.is_superuser and not _content_access() and self.is_content()

    def _reads_others(self, request: HttpRequest) -> bool:
        return request.user.is_superuser and _content_access() and self.is_content()

    def guard_content(self, request: HttpRequest, qs: QuerySet) -> QuerySet:
        if not self.content_hidden(request):
            return qs
        # Rows without an owner (team skills) belong to nobody's private data.
        qs = qs.filter(
            Q(**{self.owner_field: request.user}) | Q(**{f"{self.owner_field}__isnull": True})
        )
        return qs.distinct() if "__" in self.owner_field else qs

    def owner_id_of(self, obj: Model) -> int | None:
        return (
            type(obj)
            ._default_manager.filter(pk=obj.pk)
            .values_list(f"{self.owner_field}__pk", flat=True)
            .first()
        )

    def audit(
        self,
        request: HttpRequest,
        action: str,
        *,
        subject_id: int | None,
        object_id: str = "",
        rows: int = 1,
    ) -> None:
        content_accessed.send(
            sender=type(self),
            viewer=request.user,
            subject_id=subject_id,
            action=action,
            model=self.model._meta.label,
            object_id=object_id[:64],
            rows=rows,
            path=request.get_full_path()[:300],
        )

    def _others_q(self, request: HttpRequest) -> Q:
        return ~Q(**{self.owner_field: request.user}) & Q(**{f"{self.owner_field}__isnull": False})

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        extra_context = dict(extra_context or {})
        if self.content_hidden(request) and request.method == "GET":
            total = self.model._default_manager.count()
            hidden = gettext(
                "Only your own rows are listed: other people's content is hidden "
                "(HERMES_ADMIN_CONTENT_ACCESS is off)."
            )
            rows = ngettext("%(count)s row in all.", "%(count)s rows in all.", total) % {
                "count": number_format(total, force_grouping=True)
            }
            self.message_user(request, f"{hidden} {rows}", level=messages.INFO)
        elif self._reads_others(request):
            others = self.get_queryset(request).filter(self._others_q(request))
            count = others.count()
            if count:
                self.audit(request, "list", subject_id=None, rows=count)
        return super().changelist_view(request, extra_context)

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is not None and self._reads_others(request):
            owner = self.owner_id_of(obj)
            if owner is not None and owner != request.user.pk:
                self.audit(request, "view", subject_id=owner, object_id=str(obj.pk))
        return obj

    def log_deletions(self, request: HttpRequest, queryset: Any) -> Any:
        self._audit_deletion(request, list(queryset))
        return super().log_deletions(request, queryset)

    def _audit_deletion(self, request: HttpRequest, objs: list[Model]) -> None:
        if not self._reads_others(request):
            return
        for obj in objs:
            owner = self.owner_id_of(obj)
            if owner is not None and owner != request.user.pk:
                self.audit(request, "delete", subject_id=owner, object_id=str(obj.pk))

    # --- actions --------------------------------------------------------------------------

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if self._is_staff(request) or request.user.is_superuser:
            actions["export_selected"] = (
                OwnedModelAdmin.export_selected,
                "export_selected",
                _("Export selected %(verbose_name_plural)s (JSON)"),
            )
        return actions

    def export_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        """Download the selected rows as JSON (only rows this admin lets you see)."""
        entry = entry_for(self.model)
        serialize = entry.serialize if entry is not None and entry.serialize else row_dict
        rows = [serialize(obj) for obj in queryset.order_by("pk")]
        if self._reads_others(request):
            subjects: dict[int, int] = {}
            for obj in queryset:
                owner = self.owner_id_of(obj)
                if owner is not None and owner != request.user.pk:
                    subjects[owner] = subjects.get(owner, 0) + 1
            for owner, count in subjects.items():
                self.audit(request, "export", subject_id=owner, rows=count)
        body = json.dumps(
            {"model": self.model._meta.label, "rows": rows}, ensure_ascii=False, indent=2
        )
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
        name = self.model._meta.model_name
        response["Content-Disposition"] = f'attachment; filename="{name}-export.json"'
        return response

    # --- columns ------------------------------------------------------------------------------

    @admin.display(description=_("ID"), ordering="pk")
    def row_id(self, obj: Model) -> Any:
        """The row's id, for models whose id Django made (its "ID" is not translated)."""
        return obj.pk

    # --- ownership --------------------------------------------------------------------------

    def owns(self, request: HttpRequest, obj: Model) -> bool:
        return (
            type(obj)
            ._default_manager.filter(pk=obj.pk, **{self.owner_field: request.user})
            .exists()
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return self.guard_content(request, qs)
        qs = qs.filter(**{self.owner_field: request.user})
        return qs.distinct() if "__" in self.owner_field else qs

    get_queryset._content_guarded = True

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
        if not request.user.is_superuser or self.content_hidden(request):
            remote = db_field.remote_field.model
            related_admin = self.admin_site._registry.get(remote)
            if isinstance(related_admin, OwnedModelAdmin):
                kwargs["queryset"] = related_admin.get_queryset(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
