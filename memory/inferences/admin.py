"""Admin for inferences and for the memory provider's configuration.

Inference edits go through the services (the same gate, tombstones and recall
invalidation as the Inferences page). The provider configuration form is built from the
provider's `get_config_schema()`; only superusers see it (it belongs to no one)."""

from __future__ import annotations

import logging
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.exceptions import ServiceError
from core.privacy.admin_base import OwnedModelAdmin

from ..models import (
    Inference,
    InferenceSettings,
    InferenceState,
    InferenceTombstone,
    InferenceUse,
    ProviderConfig,
)
from . import config, services

logger = logging.getLogger(__name__)


class InferenceAdminForm(forms.ModelForm):
    class Meta:
        model = Inference
        fields = ["statement"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors or not self.instance.pk or "statement" not in self.changed_data:
            return cleaned
        # Written here: only clean() can turn a refusal into a form error.
        try:
            services.inference_correct(
                user=self.instance.owner_id,
                inference_id=self.instance.pk,
                statement=cleaned.get("statement", ""),
            )
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from None
        return cleaned


class InferenceAdmin(OwnedModelAdmin):
    form = InferenceAdminForm
    list_display = (
        "row_id",
        "short_statement",
        "owner",
        "category",
        "status",
        "confidence",
        "trust",
        "use_count",
        "updated_at",
        "last_used_at",
    )
    list_filter = ("status", "category", "origin")
    search_fields = ("statement",)
    list_select_related = ("owner",)
    readonly_fields = (
        "owner",
        "category",
        "status",
        "origin",
        "quarantine_reason",
        "confidence",
        "trust",
        "helpful_count",
        "unhelpful_count",
        "use_count",
        "evidence_messages",
        "source_session",
        "contradicted_by",
        "extractor_version",
        "created_at",
        "updated_at",
        "last_used_at",
    )
    actions = ["mark_helpful", "mark_unhelpful"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description=_("statement"))
    def short_statement(self, obj: Inference) -> str:
        return obj.statement[:80]

    @admin.display(description=_("evidence"))
    def evidence_messages(self, obj: Inference) -> str:
        rows = obj.evidence.filter(session__owner_id=obj.owner_id).order_by("id")
        return (
            format_html_join(
                "\n", "<p>#{} ({}): {}</p>", ((m.pk, m.role, m.content[:200]) for m in rows)
            )
            or "—"
        )

    def save_model(self, request: HttpRequest, obj: Inference, form: Any, change: bool) -> None:
        # The correction was written by the form's clean() through the service.
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Inference) -> None:
        services.inference_delete(user=obj.owner_id, inference_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in list(queryset):
            services.inference_delete(user=obj.owner_id, inference_id=obj.pk)

    def _feedback(self, request: HttpRequest, queryset: QuerySet, helpful: bool) -> None:
        for obj in queryset:
            services.inference_feedback(user=obj.owner_id, inference_id=obj.pk, helpful=helpful)
        count = queryset.count()
        self.message_user(
            request,
            ngettext(
                "Feedback recorded for %(count)d inference.",
                "Feedback recorded for %(count)d inferences.",
                count,
            )
            % {"count": count},
        )

    @admin.action(description=_("Mark selected inferences helpful (trust +0.05)"))
    def mark_helpful(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._feedback(request, queryset, True)

    @admin.action(description=_("Mark selected inferences not helpful (trust −0.10)"))
    def mark_unhelpful(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._feedback(request, queryset, False)


class InferenceUseAdmin(OwnedModelAdmin):
    owner_field = "inference__owner"
    list_display = ("row_id", "inference", "message", "score", "created_at")
    list_select_related = ("inference", "message")
    readonly_fields = ("inference", "message", "score", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InferenceStateAdmin(OwnedModelAdmin):
    list_display = ("session", "owner", "extracted_through", "extracted_at", "recall_at")
    readonly_fields = (
        "session",
        "owner",
        "extracted_through",
        "extracted_at",
        "recall_ids",
        "recall_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InferenceSettingsAdmin(OwnedModelAdmin):
    owner_field = "user"
    list_display = ("user", "enabled", "updated_at")
    readonly_fields = ("updated_at",)

    def save_model(
        self, request: HttpRequest, obj: InferenceSettings, form: Any, change: bool
    ) -> None:
        # Through the service: switching off must also drop the cached recall.
        user_id = obj.user_id if request.user.is_superuser and obj.user_id else request.user.pk
        saved = services.inference_settings_set(user=user_id, enabled=obj.enabled)
        obj.pk, obj.user_id = saved.pk, saved.user_id


class InferenceTombstoneAdmin(OwnedModelAdmin):
    list_display = ("row_id", "owner", "digest", "created_at")
    readonly_fields = ("owner", "digest", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --- provider configuration ------------------------------------------------------------------


def provider_schema(name: str) -> dict[str, Any]:
    from ..providers.manager import provider_class

    provider_cls = provider_class(name) if name else None
    if provider_cls is None:
        return {}
    try:
        schema = provider_cls().get_config_schema()
    except Exception:
        logger.exception("memory provider %s failed in get_config_schema", name)
        return {}
    return schema if isinstance(schema, dict) else {}


class ProviderConfigForm(forms.ModelForm):
    """Fields are added per provider from its schema (see ProviderConfigAdmin.get_form)."""

    provider_name = ""
    schema: dict[str, Any] = {}

    class Meta:
        model = ProviderConfig
        fields: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = config.provider_config_get(name=self.provider_name, schema=self.schema)
        for key, field in self.fields.items():
            if not isinstance(field.widget, forms.PasswordInput):
                field.initial = current.get(key)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if not self.provider_name or not config._properties(self.schema):
            raise forms.ValidationError(
                _("No memory provider with settings is active (HERMES_MEMORY_PROVIDER).")
            )
        values = {k: cleaned.get(k) for k in config._properties(self.schema)}
        try:
            self.values = config.clean_values(self.schema, values)
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from None
        return cleaned

    def save(self, commit: bool = True) -> ProviderConfig:
        return config.provider_config_save(
            name=self.provider_name, schema=self.schema, values=self.values
        )

    def save_m2m(self) -> None:  # the admin calls it after save(commit=False)
        return None


class ProviderConfigAdmin(admin.ModelAdmin):
    """The active provider's settings. Superusers only: the configuration is the
    deployment's, not any person's."""

    list_display = ("name", "is_active", "updated_at")

    @admin.display(boolean=True, description=_("active"))
    def is_active(self, obj: ProviderConfig) -> bool:
        from ..providers.manager import active_provider_name

        return obj.name == active_provider_name()

    def _name(self, request: HttpRequest, obj: ProviderConfig | None) -> str:
        from ..providers.manager import active_provider_name

        return obj.name if obj is not None else active_provider_name()

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        name = self._name(request, obj)
        schema = provider_schema(name)
        attrs: dict[str, Any] = {"provider_name": name, "schema": schema}
        attrs.update(config.form_fields(schema))
        return type("ProviderConfigForm", (ProviderConfigForm,), attrs)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        name = self._name(request, obj)
        schema = provider_schema(name)
        title = schema.get("title") or (
            _("Memory provider “%(name)s”") % {"name": name} if name else ""
        )
        keys = list(config._properties(schema))
        return [(title or None, {"fields": keys})]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return []

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        saved = form.save()
        obj.pk = saved.pk
        from ..providers.manager import provider_class

        provider_cls = provider_class(saved.name)
        if provider_cls is None:
            return
        try:
            provider_cls().save_config(saved.values)
        except Exception:
            logger.exception("memory provider %s failed in save_config", saved.name)
            messages.warning(
                request,
                _("Saved, but the provider “%(name)s” reported an error.") % {"name": saved.name},
            )

    def _superuser(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        from ..providers.manager import active_provider_name

        name = active_provider_name()
        return (
            self._superuser(request)
            and bool(name)
            and not ProviderConfig.objects.filter(name=name).exists()
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)


def register(site: admin.AdminSite) -> None:
    site.register(Inference, InferenceAdmin)
    site.register(InferenceUse, InferenceUseAdmin)
    site.register(InferenceState, InferenceStateAdmin)
    site.register(InferenceSettings, InferenceSettingsAdmin)
    site.register(InferenceTombstone, InferenceTombstoneAdmin)
    site.register(ProviderConfig, ProviderConfigAdmin)
