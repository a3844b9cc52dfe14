"""The models people can chat with: an OpenAI-compatible endpoint, its key (encrypted), the
model id, its context window and prices. The environment variables (OPENAI_BASE_URL,
HERMES_MODEL, ...) add one more, read-only entry (see selectors.env_choice)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


def _price(label: str, help_text: str) -> models.DecimalField:
    """An optional price in USD per million tokens."""
    return models.DecimalField(
        label, max_digits=12, decimal_places=4, null=True, blank=True, help_text=help_text
    )


class ModelEntry(models.Model):
    name = models.CharField(max_length=80, unique=True, help_text="What people see in the picker.")
    model_id = models.CharField(
        max_length=200, help_text="The id the endpoint knows, e.g. gpt-4o or llama3.1:8b."
    )
    base_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="OpenAI-compatible base URL ending in /v1; empty means the OpenAI API.",
    )
    # Fernet token (model_catalog.crypto); never the key itself.
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    context_length = models.PositiveIntegerField(default=128000)
    price_input = _price("input price", "USD per million prompt tokens.")
    price_output = _price("output price", "USD per million completion tokens.")
    price_cached_input = _price(
        "cached input price", "USD per million cached prompt tokens (empty: the input price)."
    )
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField("default for new chats", default=False)
    is_summary = models.BooleanField("summary model", default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "model"
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
