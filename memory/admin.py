"""Admin for memory. Every edit goes through memory.services, so the limit, the scanner
and the audit log apply here exactly as on the Memory page; a refused edit is shown as a
form error and nothing is stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.exceptions import ServiceError
from core.privacy.admin_base import OwnedModelAdmin

from . import services
from .models import (
    MemoryAnchor,
    MemoryEntry,
    MemoryEvent,
    SessionMemorySnapshot,
    Source,
    content_digest,
)


def _provenance(request: HttpRequest) -> services.Provenance:
    return services.Provenance(source=Source.ADMIN, actor=request.user)


class MemoryEntryAdminForm(forms.ModelForm):
    #: Set by MemoryEntryAdmin.get_form: the form needs to know who is editing.
    request: HttpRequest

    class Meta:
        model = MemoryEntry
        fields = ["owner", "target", "content"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        instance = self.instance
        if instance.pk and instance.is_pending:
            raise forms.ValidationError(
                _("This entry waits for approval; use the Approve or Reject actions.")
            )
        owner = instance.owner if instance.pk else cleaned.get("owner") or self.request.user
        # The write happens here, not in save_model: only clean() can turn a refusal into
        # a form error, and checking first then writing later would race other writers.
        try:
            if instance.pk:
                result = services.memory_entry_update(
                    user=owner,
                    entry_id=instance.pk,
                    content=cleaned.get("content", ""),
                    provenance=_provenance(self.request),
                )
                target = instance.target
            else:
                target = cleaned.get("target", "")
                result = services.memory_add(
                    user=owner,
                    target=target,
                    content=cleaned.get("content", ""),
                    provenance=_provenance(self.request),
                )
        except ServiceError as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from None
        self.saved = result.entries[0] if result.entries else None
        if self.saved is None:
            # An exact duplicate of an existing entry: that entry is the result.
            text = services.check_content(cleaned.get("content", ""))
            self.saved = (
                MemoryEntry.objects.active()
                .filter(owner=owner, target=target, content_hash=content_digest(text))
                .first()
            )
        return cleaned


@admin.register(MemoryEntry)
class MemoryEntryAdmin(OwnedModelAdmin):
    form = MemoryEntryAdminForm
    list_display = ("short_content", "owner", "target", "status", "source", "updated_at")
    list_filter = ("target", "status", "source")
    search_fields = ("content",)
    list_select_related = ("owner",)
    actions = ("approve_selected", "reject_selected")
    readonly_fields = (
        "status",
        "pending_action",
        "pending_of",
        "order",
        "source",
        "source_session",
        "source_message",
        "created_at",
        "updated_at",
    )

    @admin.display(description=_("content"))
    def short_content(self, obj: MemoryEntry) -> str:
        return obj.content if len(obj.content) <= 80 else obj.content[:79] + "…"

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form_class = super().get_form(request, obj, change=change, **kwargs)
        return type(form_class.__name__, (form_class,), {"request": request})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None:
            # Moving an entry between lists or owners is a delete plus an add.
            fields += ("owner", "target")
            if obj.is_pending:
                fields += ("content",)
        return fields

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The form's clean() already wrote through the service; point obj at the result.
        saved = getattr(form, "saved", None)
        if saved is not None:
            obj.pk = saved.pk
            obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: MemoryEntry) -> None:
        try:
            if obj.is_pending:
                services.memory_pending_reject(
                    user=obj.owner, entry_id=obj.pk, provenance=_provenance(request)
                )
            else:
                services.memory_entry_delete(
                    user=obj.owner, entry_id=obj.pk, provenance=_provenance(request)
                )
        except ServiceError as exc:
            self.message_user(request, exc.message, level=messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        for obj in queryset.select_related("owner"):
            self.delete_model(request, obj)

    @admin.action(description=_("Approve selected pending entries"))
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        done = 0
        for obj in queryset.filter(status=MemoryEntry.Status.PENDING).select_related("owner"):
            try:
                services.memory_pending_approve(
                    user=obj.owner, entry_id=obj.pk, provenance=_provenance(request)
                )
                done += 1
            except ServiceError as exc:
                self.message_user(request, f"{obj}: {exc.message}", level=messages.ERROR)
        self.message_user(
            request,
            ngettext(
                "Approved %(count)d pending entry.", "Approved %(count)d pending entries.", done
            )
            % {"count": done},
        )

    @admin.action(description=_("Reject selected pending entries"))
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        done = 0
        for obj in queryset.filter(status=MemoryEntry.Status.PENDING).select_related("owner"):
            services.memory_pending_reject(
                user=obj.owner, entry_id=obj.pk, provenance=_provenance(request)
            )
            done += 1
        self.message_user(
            request,
            ngettext(
                "Rejected %(count)d pending entry.", "Rejected %(count)d pending entries.", done
            )
            % {"count": done},
        )


class ReadOnlyAdmin(OwnedModelAdmin):
    """Records written only by the services: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MemoryEvent)
class MemoryEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "owner", "action", "target", "verdict", "source", "short_after")
    list_filter = ("verdict", "action", "target", "source")
    search_fields = ("before", "after", "detail")
    list_select_related = ("owner",)

    @admin.display(description=_("text"))
    def short_after(self, obj: MemoryEvent) -> str:
        text = obj.after or obj.before
        return text if len(text) <= 80 else text[:79] + "…"


@admin.register(MemoryAnchor)
class MemoryAnchorAdmin(ReadOnlyAdmin):
    list_display = ("owner", "target", "version", "updated_at")


@admin.register(SessionMemorySnapshot)
class SessionMemorySnapshotAdmin(ReadOnlyAdmin):
    owner_field = "session__owner"
    list_display = ("session", "created_at")
    list_select_related = ("session",)
    fields = ("session", "rendered_text", "entries", "created_at")

    @admin.display(description=_("rendered"))
    def rendered_text(self, obj: SessionMemorySnapshot) -> str:
        # The text frozen into the system prompt, as the model read it.
        return format_html("<pre>{}</pre>", obj.rendered)
