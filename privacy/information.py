"""The Art. 15 information sheet written into every archive's manifest.json: purposes,
categories of data (from the registry), recipients (the configured LLM endpoint, without
credentials), retention, the person's rights and where the data came from."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from core.privacy import registry
from model_catalog.selectors import ModelChoice, default_choice, enabled_choices, summary_choice


def _safe_url(url: str) -> str:
    """The URL without any user:password part (never put a credential in an export)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _endpoint(choice: ModelChoice) -> str:
    base = _safe_url(choice.base_url)
    if not base and choice.configured:
        base = "https://api.openai.com/v1"
    return base or "none configured"


def llm_recipient() -> dict[str, Any]:
    """Where conversation content is sent: the OpenAI-compatible endpoints of the models
    people can pick (named without credentials), the default's first."""
    default, summary = default_choice(), summary_choice()
    others = sorted({_endpoint(c) for c in [*enabled_choices(), summary]} - {_endpoint(default)})
    return {
        "name": "Language model endpoint (OpenAI-compatible API)",
        "endpoint": _endpoint(default),
        "other_endpoints": others,
        "chat_model": default.model_id or "none configured",
        "summary_model": summary.model_id,
        "receives": (
            "Each message you send with the conversation so far, the frozen system prompt "
            "(your custom instructions, agent identity, memory and skills index), recalled "
            "memory, tool results, and — for compression, memory reviews and search "
            "summaries — transcripts of your conversations."
        ),
    }


def information_sheet() -> dict[str, Any]:
    """The GDPR Art. 15(1) information: purposes, categories, recipients, retention,
    rights, source and automated decision-making."""
    recipients = [llm_recipient()]
    if settings.HERMES_MEMORY_PROVIDER:
        recipients.append(
            {
                "name": f"External memory provider {settings.HERMES_MEMORY_PROVIDER!r}",
                "receives": "Your messages and the agent's answers, to recall from later.",
            }
        )
    categories: dict[str, bool] = {}
    for entry in registry.entries():
        categories[entry.category] = categories.get(entry.category, False) or entry.provided
    audit_days = settings.HERMES_AUDIT_RETENTION_DAYS
    return {
        "controller": settings.HERMES_PUBLIC_URL or "the operators of this Hermes Web site",
        "purposes": [
            "Running your conversations with the AI agent (contract).",
            "Remembering what you asked it to remember, and what it learns about you, across "
            "conversations (memory, skills) — you can switch memory off or use temporary "
            "chats.",
            "Searching and summarising your past conversations for you.",
            "Security: login throttling, audit logs of memory writes and of administrators "
            "opening your content.",
        ],
        "categories": [
            {"category": name, "provided_by_you": provided}
            for name, provided in sorted(categories.items())
        ],
        "recipients": recipients,
        "retention": {
            "conversations": "Until you delete them or your account.",
            "temporary_chats": f"{settings.HERMES_TEMPORARY_CHAT_DAYS} days after they start.",
            "memory": "Until you delete the entry, forget all memory, or delete your account.",
            "memory_audit_log": (
                f"{audit_days} days." if audit_days > 0 else "Until you delete your account."
            ),
            "data_exports": f"{settings.HERMES_EXPORT_EXPIRY_HOURS} hours after they are ready.",
            "backups": (
                "Database backups made by the operators are put beyond use and overwritten "
                "on their own schedule."
            ),
        },
        "rights": [
            "Access and portability: this archive (Account page → Download my data, or GET "
            "/api/me/export/).",
            "Rectification: edit memory entries, skills, titles and settings on their pages.",
            "Erasure: delete single entries, conversations and skills; 'Forget all memory'; "
            "'Delete my account' (or DELETE /api/me/) removes everything.",
            "Restriction and objection: switch memory off, use temporary chats.",
            "You may complain to your data protection supervisory authority.",
        ],
        "source": (
            "What you typed or imported, and what the agent wrote while working for you "
            "(memory entries and skills record whether you, the chat, a background review or "
            "a compression flush wrote them)."
        ),
        "automated_decision_making": (
            "The agent decides by itself what to save to memory and skills and recalls it in "
            "later conversations. It makes no decision with legal or similarly significant "
            "effects on you."
        ),
        "recipients_note": "No data is sold or shared with anyone else.",
    }
