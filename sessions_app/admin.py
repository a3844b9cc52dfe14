from __future__ import annotations

from django.contrib import admin

from hermes_site.admin_base import OwnedModelAdmin

from .models import Message, Session, StateMeta, SystemPrompt


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

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(SystemPrompt)
class SystemPromptAdmin(OwnedModelAdmin):
    owner_field = "sessions__owner"
    list_display = ("hash",)
    readonly_fields = ("hash", "prompt")


@admin.register(StateMeta)
class StateMetaAdmin(admin.ModelAdmin):
    list_display = ("key", "value")
