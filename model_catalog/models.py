"""The models people can chat with: an OpenAI-compatible endpoint, its key (encrypted), the
model id, its context window and prices. The environment variables (OPENAI_BASE_URL,
HERMES_MODEL, ...) add one more, read-only entry (see selectors.env_choice)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


def _price(label: str | Promise, help_text: str | Promise) -> models.DecimalField:
    """An optional price in USD per million tokens."""
    return models.DecimalField(
        label, max_digits=12, decimal_places=4, null=True, blank=True, help_text=help_text
    )


class ModelEntry(models.Model):
    name = models.CharField(
        verbose_name=_("name"),
        max_length=80,
        unique=True,
        help_text=_("What people see in the picker."),
    )
    model_id = models.CharField(
        verbose_name=_("model ID"),
        max_length=200,
        help_text=_("The id the endpoint knows, e.g. gpt-4o or llama3.1:8b."),
    )
    base_url = models.URLField(
        verbose_name=_("base URL"),
        max_length=500,
        blank=True,
        help_text=_("OpenAI-compatible base URL ending in /v1; empty means the OpenAI API."),
    )
    # Fernet token (model_catalog.crypto); never the key itself.
    api_key_encrypted = models.TextField(
        verbose_name=_("API key (encrypted)"), blank=True, default="", editable=False
    )
    context_length = models.PositiveIntegerField(verbose_name=_("context length"), default=128000)
    price_input = _price(_("input price"), _("USD per million prompt tokens."))
    price_output = _price(_("output price"), _("USD per million completion tokens."))
    price_cached_input = _price(
        _("cached input price"),
        _("USD per million cached prompt tokens (empty: the input price)."),
    )
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    is_default = models.BooleanField(_("default for new chats"), default=False)
    is_summary = models.BooleanField(_("summary model"), default=False)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name_plural = _("models")
        ordering = ["name"]
        verbose_name = _("model")
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="model_one_default"
            ),
            models.UniqueConstraint(
                fields=["is_summary"], condition=Q(is_summary=True), name="model_one_summary"
            ),
            models.CheckConstraint(
                condition=Q(enabled=True) | Q(is_default=False, is_summary=False),
                name="model_default_and_summary_enabled",
            ),
            models.CheckConstraint(
                condition=Q(context_length__gte=1), name="model_context_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name
