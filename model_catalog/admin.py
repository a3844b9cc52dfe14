"""The models in Django's admin (staff with the model's permissions, superusers).

The API key is write-only: the form never renders it back (it says whether one is set),
a blank field keeps it, a checkbox removes it. Saving goes through model_entry_save. Each
entry's page links to a listing of its endpoint's `/v1/models` to pick the model id from.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _

from core.exceptions import ServiceError

from .crypto import FALLBACK_WARNING, KeyUnreadable, decrypt, uses_fallback
from .models import ModelEntry
from .services import model_endpoint_list, model_entry_save


def key_status(entry: ModelEntry | None) -> str:
    if entry is None or not entry.api_key_encrypted:
        return _("No key is set.")
    try:
        decrypt(entry.api_key_encrypted)
    except KeyUnreadable as exc:
        return str(exc)
    return _("A key is set — leave blank to keep it.")


class ModelEntryForm(forms.ModelForm):
    base_url = forms.URLField(
        label=_("Base URL"),
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=ModelEntry._meta.get_field("base_url").help_text,
    )
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored key"), required=False)

    class Meta:
        model = ModelEntry
        fields = [
            "name",
            "enabled",
            "is_default",
            "is_summary",
            "base_url",
            "model_id",
            "context_length",
            "price_input",
            "price_output",
            "price_cached_input",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["api_key"].help_text = key_status(self.instance if self.instance.pk else None)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("api_key") and data.get("clear_api_key"):
            raise forms.ValidationError(_("Enter a new key or remove the stored one, not both."))
        if not data.get("enabled") and (data.get("is_default") or data.get("is_summary")):
            raise forms.ValidationError(
                _("A disabled model cannot be the default or the summary model.")
            )
        return data


@admin.register(ModelEntry)
class ModelEntryAdmin(admin.ModelAdmin):
    form = ModelEntryForm
    list_display = ("name", "model_id", "base_url", "enabled", "is_default", "is_summary", "key")
    list_filter = ("enabled",)
    search_fields = ("name", "model_id")
    fieldsets = (
        (None, {"fields": ("name", "enabled", "is_default", "is_summary")}),
        (_("Endpoint"), {"fields": ("base_url", "api_key", "clear_api_key", "model_id")}),
        (
            _("Limits and prices"),
            {"fields": ("context_length", "price_input", "price_output", "price_cached_input")},
        ),
    )

    @admin.display(description=_("API key"))
    def key(self, entry: ModelEntry) -> str:
        return _("set") if entry.api_key_encrypted else "—"

    def save_model(self, request: HttpRequest, obj: ModelEntry, form: Any, change: bool) -> None:
        new_key = form.cleaned_data.get("api_key") or ""
        model_entry_save(
            entry=obj,
            new_api_key=new_key,
            clear_api_key=bool(form.cleaned_data.get("clear_api_key")),
        )
        if new_key and uses_fallback():
            self.message_user(request, FALLBACK_WARNING, level=messages.WARNING)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.endpoint_models_view)
        return [
            path("<int:pk>/endpoint-models/", view, name="model_catalog_modelentry_endpoint"),
            *super().get_urls(),
        ]

    def endpoint_models_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """The endpoint's `/v1/models`; POST `model_id` makes one of them the entry's id."""
        entry = get_object_or_404(ModelEntry, pk=pk)
        if not self.has_change_permission(request, entry):
            raise PermissionDenied
        back = reverse("admin:model_catalog_modelentry_change", args=[entry.pk])
        if request.method == "POST":
            entry.model_id = str(request.POST.get("model_id", ""))[:200].strip()
            if entry.model_id:
                model_entry_save(entry=entry)
                self.message_user(
                    request,
                    _("%(name)s now uses %(model)s.")
                    % {"name": entry.name, "model": entry.model_id},
                )
            return HttpResponseRedirect(back)
        ids: list[str] = []
        error = ""
        try:
            ids = model_endpoint_list(
                base_url=entry.base_url, api_key=decrypt(entry.api_key_encrypted)
            )
        except (ServiceError, KeyUnreadable) as exc:
            error = exc.text if isinstance(exc, ServiceError) else str(exc)
            self.message_user(request, error, level=messages.ERROR)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "entry": entry,
            "ids": ids,
            "error": error,
            "back": back,
            "title": _("Models at %(url)s") % {"url": entry.base_url}
            if entry.base_url
            else _("Models at the OpenAI API"),
        }
        return TemplateResponse(
            request, "admin/model_catalog/modelentry/endpoint_models.html", context
        )
