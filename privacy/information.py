"""The Art. 15 information sheet written into every archive's manifest.json: purposes,
categories of data (from the registry), recipients (the configured LLM endpoint, without
credentials), retention, the person's rights and where the data came from. Written in the
active language (the archive's owner's, see export.build_export); its keys stay English."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.utils.translation import gettext, gettext_noop, ngettext

from core.privacy import registry
from model_catalog.selectors import ModelChoice, default_choice, enabled_choices, summary_choice

#: The categories the apps register (core.privacy.registry, in each app's personal_data),
#: for the catalog: the sheet names each in its reader's language.
CATEGORIES = (
    gettext_noop("Profile and agent settings"),
    gettext_noop("API tokens (names and first characters only)"),
    gettext_noop("Team role and daily quotas"),
    gettext_noop("Single sign-on identities (the provider and its id for you)"),
    gettext_noop("Conversations (titles, settings, usage counters)"),
    gettext_noop("Messages, tool calls and recalled memory sent with them"),
    gettext_noop("Frozen system prompts (with the memory and skills they showed)"),
    gettext_noop("Cached summaries of your conversations for searches"),
    gettext_noop("Memory: notes about you and for the agent, with provenance"),
    gettext_noop("Memory audit log (every write, refusal and block)"),
    gettext_noop("Memory list versions"),
    gettext_noop("Which memory entries each conversation's prompt showed"),
    gettext_noop("Inferences about you"),
    gettext_noop("Which inferences were sent with which of your messages"),
    gettext_noop("Inference progress and recall prepared for each conversation"),
    gettext_noop("Fingerprints of inferences you deleted (so they are not derived again)"),
    gettext_noop("Whether the agent may infer things about you"),
    gettext_noop("Skills"),
    gettext_noop("Skill files"),
    gettext_noop("Skill revision history"),
    gettext_noop("Which skills each conversation's prompt listed"),
    gettext_noop("Background reviews of your conversations"),
    gettext_noop("Your data exports"),
    gettext_noop("Your imports of ChatGPT and Claude exports"),
    gettext_noop("Administrators who opened your content"),
)


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
    return base or gettext("none configured")


def llm_recipient() -> dict[str, Any]:
    """Where conversation content is sent: the OpenAI-compatible endpoints of the models
    people can pick (named without credentials), the default's first."""
    default, summary = default_choice(), summary_choice()
    others = sorted({_endpoint(c) for c in [*enabled_choices(), summary]} - {_endpoint(default)})
    return {
        "name": gettext("Language model endpoint (OpenAI-compatible API)"),
        "endpoint": _endpoint(default),
        "other_endpoints": others,
        "chat_model": default.model_id or gettext("none configured"),
        "summary_model": summary.model_id,
        "receives": gettext(
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
                "name": gettext("External memory provider %(name)s")
                % {"name": repr(settings.HERMES_MEMORY_PROVIDER)},
                "receives": gettext("Your messages and the agent's answers, to recall from later."),
            }
        )
    categories: dict[str, bool] = {}
    for entry in registry.entries():
        categories[entry.category] = categories.get(entry.category, False) or entry.provided
    audit_days = settings.HERMES_AUDIT_RETENTION_DAYS
    chat_days = settings.HERMES_TEMPORARY_CHAT_DAYS
    export_hours = settings.HERMES_EXPORT_EXPIRY_HOURS
    return {
        "controller": settings.HERMES_PUBLIC_URL
        or gettext("the operators of this Hermes Web site"),
        "purposes": [
            gettext("Running your conversations with the AI agent (contract)."),
            gettext(
                "Remembering what you asked it to remember, and what it learns about you, "
                "across conversations (memory, skills) — you can switch memory off or use "
                "temporary chats."
            ),
            gettext("Searching and summarising your past conversations for you."),
            gettext(
                "Security: login throttling, audit logs of memory writes and of administrators "
                "opening your content."
            ),
        ],
        # The category as registered (the same in every archive) and as its reader reads it.
        "categories": [
            {"category": name, "label": gettext(name), "provided_by_you": provided}
            for name, provided in sorted(categories.items())
        ],
        "recipients": recipients,
        "retention": {
            "conversations": gettext("Until you delete them or your account."),
            "temporary_chats": ngettext(
                "%(days)s day after they start.", "%(days)s days after they start.", chat_days
            )
            % {"days": chat_days},
            "memory": gettext(
                "Until you delete the entry, forget all memory, or delete your account."
            ),
            "memory_audit_log": (
                ngettext("%(days)s day.", "%(days)s days.", audit_days) % {"days": audit_days}
                if audit_days > 0
                else gettext("Until you delete your account.")
            ),
            "data_exports": ngettext(
                "%(hours)s hour after they are ready.",
                "%(hours)s hours after they are ready.",
                export_hours,
            )
            % {"hours": export_hours},
            "backups": gettext(
                "Database backups made by the operators are put beyond use and overwritten "
                "on their own schedule."
            ),
        },
        "rights": [
            gettext(
                "Access and portability: this archive (Account page → Download my data, or "
                "GET /api/me/export/)."
            ),
            gettext(
                "Rectification: edit memory entries, skills, titles and settings on their pages."
            ),
            gettext(
                "Erasure: delete single entries, conversations and skills; “Forget all "
                "memory”; “Delete my account” (or DELETE /api/me/) removes everything."
            ),
            gettext("Restriction and objection: switch memory off, use temporary chats."),
            gettext("You may complain to your data protection supervisory authority."),
        ],
        "source": gettext(
            "What you typed or imported, and what the agent wrote while working for you "
            "(memory entries and skills record whether you, the chat, a background review or "
            "a compression flush wrote them)."
        ),
        "automated_decision_making": gettext(
            "The agent decides by itself what to save to memory and skills and recalls it in "
            "later conversations. It makes no decision with legal or similarly significant "
            "effects on you."
        ),
        "recipients_note": gettext("No data is sold or shared with anyone else."),
    }
