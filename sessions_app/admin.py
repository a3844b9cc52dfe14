from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.privacy.admin_base import OwnedModelAdmin

from .models import Message, SearchSummary, Session, StateMeta, SystemPrompt


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("role", "content", "tool_name", "status", "timestamp")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Session)
class SessionAdmin(OwnedModelAdmin):
    list_display = ("id", "title", "owner", "model", "message_count", "started_at", "end_reason")
    list_filter = ("end_reason", "archived", "pinned")
    search_fields = ("id", "title")
    readonly_fields = (
        "id",
        "system_prompt",
        "parent",
        "message_count",
        "tool_call_count",
        "api_call_count",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "estimated_cost_usd",
    )
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(OwnedModelAdmin):
    owner_field = "session__owner"
    list_display = ("id", "session", "role", "short_content", "status", "timestamp")
    list_filter = ("role", "status")
    search_fields = ("content",)
    list_select_related = ("session",)

    @admin.display(description=_("content"))
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(SystemPrompt)
class SystemPromptAdmin(OwnedModelAdmin):
    owner_field = "sessions__owner"
    list_display = ("hash",)
    fields = ("hash", "prompt_text")
    readonly_fields = ("hash", "prompt_text")

    @admin.display(description=_("prompt"))
    def prompt_text(self, obj: SystemPrompt) -> str:
        # What was sent to the model, as it was sent (the agent's words stay English).
        return format_html("<pre>{}</pre>", obj.prompt)


@admin.register(StateMeta)
class StateMetaAdmin(admin.ModelAdmin):
    list_display = ("key", "value")


# --- L2 search ---------------------------------------------------------------------------


@admin.register(SearchSummary)
class SearchSummaryAdmin(OwnedModelAdmin):
    """Cached search summaries: readable and deletable (to force a fresh one), not edited."""

    list_display = ("id", "session", "short_query", "status", "created_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("query",)
    list_select_related = ("session",)
    readonly_fields = (
        "session",
        "query",
        "query_hash",
        "last_message_id",
        "status",
        "summary",
        "error",
        "attempts",
        "created_at",
        "claimed_at",
        "finished_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description=_("query"))
    def short_query(self, obj: SearchSummary) -> str:
        return obj.query[:60]
