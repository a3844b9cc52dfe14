"""Admin for accounts as privacy sees them: superusers manage accounts and see how much each
person stores (counts, never the content); deleting an account runs the full erasure.
Also the export jobs and the audit log of administrators opening people's content."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.exceptions import ServiceError
from core.privacy.admin_base import OwnedModelAdmin

from .erase import account_erase
from .models import AdminContentAccess, ExportJob

User = get_user_model()


def _count(model: Any, owner_path: str) -> Coalesce:
    rows = (
        model._default_manager.filter(**{owner_path: OuterRef("pk")})
        .order_by()
        .values(owner_path)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


class HermesUserAdmin(UserAdmin):
    """Django's user admin plus per-person counts; delete = account erasure."""

    list_display = (
        "username",
        "is_active",
        "is_staff",
        "conversation_count",
        "message_count",
        "memory_count",
        "skill_count",
        "last_login",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        from memory.models import MemoryEntry
        from sessions_app.models import Message, Session
        from skills_app.models import Skill

        return (
            super()
            .get_queryset(request)
            .annotate(
                n_sessions=_count(Session, "owner"),
                n_messages=_count(Message, "session__owner"),
                n_memory=_count(MemoryEntry, "owner"),
                n_skills=_count(Skill, "owner"),
            )
        )

    @admin.display(description=_("conversations"), ordering="n_sessions")
    def conversation_count(self, obj: Any) -> int:
        return obj.n_sessions

    @admin.display(description=_("messages"), ordering="n_messages")
    def message_count(self, obj: Any) -> int:
        return obj.n_messages

    @admin.display(description=_("memory entries"), ordering="n_memory")
    def memory_count(self, obj: Any) -> int:
        return obj.n_memory

    @admin.display(description=_("skills"), ordering="n_skills")
    def skill_count(self, obj: Any) -> int:
        return obj.n_skills

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Django lists every related row by its text (messages, memory entries…) on the
        # confirmation page; show how many rows of each kind instead.
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        return [str(o) for o in objs], model_count, set(), []

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        try:
            report = account_erase(user=obj, actor=request.user)
        except ServiceError as exc:
            self.message_user(request, exc.text, level=messages.ERROR)
            return
        self.message_user(
            request,
            ngettext(
                "Erased %(user)s: %(count)s row.", "Erased %(user)s: %(count)s rows.", report.total
            )
            % {"user": obj, "count": number_format(report.total, force_grouping=True)},
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for user in list(queryset):
            self.delete_model(request, user)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, HermesUserAdmin)


@admin.register(ExportJob)
class ExportJobAdmin(OwnedModelAdmin):
    list_display = ("row_id", "owner", "status", "progress", "size", "created_at", "expires_at")
    list_filter = ("status",)
    readonly_fields = (
        "owner",
        "status",
        "progress",
        "stage",
        "file_name",
        "size",
        "error_shown",
        "task_id",
        "created_at",
        "started_at",
        "finished_at",
        "expires_at",
    )

    @admin.display(description=_("error"))
    def error_shown(self, job: ExportJob) -> str:
        return job.error_text

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # started from the Account page, where the owner downloads them

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AdminContentAccess)
class AdminContentAccessAdmin(OwnedModelAdmin):
    """The audit log: superusers see all of it; everyone else sees who opened theirs."""

    owner_field = "subject"
    list_display = ("created_at", "viewer", "action", "model", "object_id", "rows", "subject")
    list_filter = ("action", "model")
    readonly_fields = (
        "created_at",
        "viewer",
        "subject",
        "action",
        "model",
        "object_id",
        "rows",
        "path",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an audit log nobody can edit
