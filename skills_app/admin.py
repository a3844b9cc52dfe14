"""Admin for skills. Staff see their own skills and the team's; team skills are read-only
except for superusers, who publish and change them (through the same services as the
pages, so they are validated, scanned and versioned)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.exceptions import ServiceError
from core.privacy.admin_base import OwnedModelAdmin
from memory.scanner import scan

from . import services, skillmd
from .models import ReviewRun, SessionSkillState, Skill, SkillFile, SkillRevision


class SkillAdminForm(forms.ModelForm):
    class Meta:
        model = Skill
        fields = ("owner", "is_team", "category", "content", "enabled", "pinned")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        content = data.get("content")
        if content:
            try:
                parsed = skillmd.parse(content)
                skillmd.check_category(data.get("category") or "")
            except ServiceError as exc:
                raise forms.ValidationError(exc.message) from None
            if self.instance.pk and parsed.name != self.instance.name:
                raise forms.ValidationError(_("The name in the frontmatter cannot change."))
            findings = scan(content, scope="strict")
            if findings:
                raise forms.ValidationError(findings[0].message)
        return data


def _team_or_own(request: HttpRequest, field: str) -> Q:
    return Q(**{f"{field}is_team": True}) | Q(**{f"{field}owner": request.user})


class TeamVisibleAdmin(OwnedModelAdmin):
    """Staff also see team rows (read-only); only superusers change them."""

    #: ORM prefix from this model to its Skill ("" for Skill itself).
    skill_prefix = ""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return qs
        return qs.filter(_team_or_own(request, self.skill_prefix)).distinct()

    def _is_team(self, obj: Model) -> bool:
        skill = obj if isinstance(obj, Skill) else obj.skill
        return skill.is_team

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is not None and self._is_team(obj):
            return self._is_staff(request)
        return super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is not None and self._is_team(obj):
            return request.user.is_superuser
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is not None and self._is_team(obj):
            return request.user.is_superuser
        return super().has_delete_permission(request, obj)


@admin.register(Skill)
class SkillAdmin(TeamVisibleAdmin):
    form = SkillAdminForm
    list_display = ("name", "category", "owner", "is_team", "enabled", "pinned", "updated_at")
    list_filter = ("is_team", "enabled", "pinned")
    search_fields = ("name", "description")
    readonly_fields = ("name", "description", "tags", "created_at", "updated_at")
    actions = ["publish_to_team"]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("is_team")
        if obj is not None:
            fields += ["owner", "is_team"]
        return fields

    def save_model(self, request: HttpRequest, obj: Skill, form: Any, change: bool) -> None:
        data = form.cleaned_data
        try:
            if obj.is_team and request.user.is_superuser:
                saved = services.team_skill_save(
                    actor=request.user,
                    content=data["content"],
                    category=data.get("category") or "",
                    skill=Skill.objects.get(pk=obj.pk) if change else None,
                    enabled=data.get("enabled", True),
                    pinned=data.get("pinned", False),
                )
            else:
                owner = obj.owner if obj.owner_id else request.user
                if change:
                    saved = services.skill_edit(
                        user=owner,
                        name=obj.name,
                        content=data["content"],
                        category=data.get("category") or "",
                    )
                else:
                    saved = services.skill_create(
                        user=owner, content=data["content"], category=data.get("category") or ""
                    )
                saved = services.skill_set_flags(
                    user=owner,
                    name=saved.name,
                    enabled=data.get("enabled", True),
                    pinned=data.get("pinned", False),
                )
        except ServiceError as exc:
            # The admin has already validated; this is a race or a blocked payload.
            self.message_user(request, exc.message, level=messages.ERROR)
            return
        obj.pk = saved.pk

    @admin.action(description=_("Publish to the team (copy as a read-only team skill)"))
    def publish_to_team(self, request: HttpRequest, queryset: QuerySet) -> None:
        for skill in queryset.filter(is_team=False):
            try:
                services.team_skill_publish(actor=request.user, skill=skill)
            except ServiceError as exc:
                self.message_user(request, f"{skill.name}: {exc.message}", level=messages.ERROR)
            else:
                self.message_user(
                    request, _("Published %(name)s to the team.") % {"name": skill.name}
                )

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not request.user.is_superuser:
            actions.pop("publish_to_team", None)
        return actions


@admin.register(SkillFile)
class SkillFileAdmin(TeamVisibleAdmin):
    owner_field = "skill__owner"
    skill_prefix = "skill__"
    list_display = ("path", "skill", "size", "updated_at")
    search_fields = ("path", "skill__name")
    fields = ("skill", "path", "size", "updated_at")
    readonly_fields = ("skill", "path", "size", "updated_at")
    list_select_related = ("skill",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # files are added on the Skills page, where they are validated

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(SkillRevision)
class SkillRevisionAdmin(TeamVisibleAdmin):
    owner_field = "skill__owner"
    skill_prefix = "skill__"
    list_display = ("skill", "number", "document", "action", "author", "created_at")
    list_filter = ("author", "action")
    list_select_related = ("skill",)
    fields = readonly_fields = (
        "skill",
        "number",
        "action",
        "author",
        "actor",
        "source_session",
        "file_path",
        "content",
        "summary_text",
        "created_at",
    )

    @admin.display(description=_("document"))
    def document(self, obj: SkillRevision) -> str:
        return obj.document

    @admin.display(description=_("summary"))
    def summary_text(self, obj: SkillRevision) -> str:
        # Written once, when the revision was made, as a record of what changed (like a
        # log line): shown as it was written.
        return format_html('<span translate="no">{}</span>', obj.summary) if obj.summary else "—"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(SessionSkillState)
class SessionSkillStateAdmin(OwnedModelAdmin):
    owner_field = "session__owner"
    list_display = (
        "session",
        "iterations_since_skill_review",
        "turns_since_memory_review",
        "index_frozen_at",
    )
    readonly_fields = ("session", "included_skills_list", "index_frozen_at", "updated_at")
    exclude = ("included_skills",)

    @admin.display(description=_("included skills"))
    def included_skills_list(self, obj: SessionSkillState) -> str:
        # What the frozen prompt listed, as stored (JSON).
        return format_html("<code>{}</code>", json.dumps(obj.included_skills, ensure_ascii=False))


@admin.register(ReviewRun)
class ReviewRunAdmin(OwnedModelAdmin):
    owner_field = "session__owner"
    list_display = ("session", "kind", "status", "created_at", "finished_at")
    list_filter = ("kind", "status")
    list_select_related = ("session",)
    readonly_fields = (
        "session",
        "last_message_id",
        "kind",
        "status",
        "created_at",
        "started_at",
        "finished_at",
        "outcome",
        "actions",
        "prompt_tokens",
        "completion_tokens",
        "error",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
