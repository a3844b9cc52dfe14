"""The frozen system prompt (L0 working context).

Assembled once per session, stored on it, and sent byte-for-byte on every call so the
provider's prefix cache keeps hitting; only compression rebuilds it. Memory writes made
during the session therefore do not change it — the memory tool reports live usage instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.services import profile_get

from ..models import API_SOURCE, Session
from ..selectors import PathRow, api_messages_of, path_rows
from ..services import system_prompt_store
from ..session_model import session_model_choice, session_model_for_turn
from .extensions import prompt_sections
from .llm import ModelChoice
from .tools import registry

MEMORY_GUIDANCE = (
    "## Memory\n"
    "You have a persistent memory of this person across conversations: your notes (MEMORY) "
    "and their profile (USER PROFILE), shown below as they were when this conversation "
    "started. Use the `memory` tool to add, replace or remove entries. Save durable, "
    "declarative facts that will matter in every future conversation — preferences, "
    'corrections, who they are, their environment — as soon as you learn them ("User '
    'prefers concise answers", not "Always answer concisely"). Do not save task progress '
    "or anything that will be stale in a week; conversation history is searchable for that. "
    "Memory has a hard size budget: consolidate (replace or remove) rather than skip. How to "
    "do things belongs in skills, not memory."
)
SEARCH_GUIDANCE = (
    "## Past conversations\n"
    'Use `session_search` to recall earlier conversations with this person ("what did we '
    'decide about…"). Without a query it lists recent conversations; with a query it '
    "returns focused summaries of the best matches."
)
SKILLS_GUIDANCE = (
    "## Skills\n"
    "Skills are procedures you or the team wrote down. The index below lists them; load one "
    "with `skill_view` before following it, and keep them current with `skill_manage` when "
    "you learn a better way (prefer patching an existing skill over creating a new one)."
)
PLATFORM_NOTE = (
    "Platform: Hermes Web, a browser chat. Your replies are rendered as Markdown (code blocks, "
    "lists, tables and links work; raw HTML and images from other sites are not shown)."
)

API_PLATFORM_NOTE = (
    "Platform: Hermes Web's OpenAI-compatible API, used from another application (a chat "
    "front-end, an editor or a script). Reply in Markdown; the client decides how it is shown."
)


def uses_memory(session: Session, profile: Any) -> bool:
    """Memory (hot memory, recall, past conversations) is off for temporary chats and for
    people who switched it off."""
    return profile.memory_enabled and not session.temporary


def tool_names_for(*, session: Session, profile: Any) -> list[str]:
    """The agent's tools in a chat turn, in a stable order (part of the cached prefix)."""
    toolsets = ["skills"] + (["memory", "search"] if uses_memory(session, profile) else [])
    return sorted(registry.names(toolsets))


def build_system_prompt(*, session: Session, provider_block: str, profile: Any = None) -> str:
    """Assemble the prompt: identity, tool guidance, provider block, custom instructions,
    the registered sections (MEMORY and USER snapshots, skills index), date, platform and
    model. `profile`: the owner's, when the caller has just read it."""
    profile = profile or profile_get(user=session.owner)
    tools = set(tool_names_for(session=session, profile=profile))
    parts = [profile.identity.strip() or settings.HERMES_IDENTITY]
    if "memory" in tools:
        parts.append(MEMORY_GUIDANCE)
    if "session_search" in tools:
        parts.append(SEARCH_GUIDANCE)
    if tools & {"skills_list", "skill_view", "skill_manage"}:
        parts.append(SKILLS_GUIDANCE)
    if provider_block.strip():
        parts.append(provider_block.strip())
    if profile.custom_instructions.strip():
        parts.append("## Instructions from this person\n" + profile.custom_instructions.strip())
    memory_on = uses_memory(session, profile)
    for section in prompt_sections():
        block = (
            section.freeze(session=session, profile=profile)
            if memory_on or not section.memory
            else ""
        )
        if block:
            parts.append(block)
    started = timezone.localtime(session.started_at)
    platform = API_PLATFORM_NOTE if session.source == API_SOURCE else PLATFORM_NOTE
    parts.append(f"Conversation started: {started:%A, %B %-d, %Y}.\n{platform}")
    parts.append(model_note(session))
    return "\n\n".join(parts)


def model_note(session: Session) -> str:
    """The model-dependent part: a switch freezes a new prompt with the new model's note."""
    choice = session_model_choice(session)
    if choice is None or not choice.model_id:
        return "Model: unknown."
    return f"Model: {choice.model_id} (context window: {choice.context_length:,} tokens)."


def session_freeze_prompt(*, session: Session, provider_block: str, profile: Any = None) -> str:
    """Build and store the session's prompt; called once per session (and by compression).
    One transaction: the sections' records (which memory entries and skills the prompt
    shows) and the prompt are stored together or not at all. `profile`: the owner's, when
    the caller has just read it (else read once here for every section)."""
    with transaction.atomic():
        text = build_system_prompt(session=session, provider_block=provider_block, profile=profile)
        system_prompt_store(session=session, text=text)
    return text


@dataclass(frozen=True)
class TurnFacts:
    """What a turn's setup reads from the database (in one hop to the database thread)."""

    model: ModelChoice
    profile: Any
    memory_on: bool
    #: The frozen system prompt ("" until the first turn freezes it).
    prompt: str
    #: The user's messages on the path, when the turn recalls memory for one (else 0).
    user_turns: int
    #: The conversation as the first model call sends it (selectors.api_messages), its
    #: system message `prompt` as read here.
    messages: list[dict[str, Any]]


def turn_facts(
    *,
    session: Session,
    user: Any,
    recalling: bool,
    may_switch: bool = True,
    profile: Any = None,
    path: list[PathRow] | None = None,
) -> TurnFacts | None:
    """`recalling`: the turn answers a new user message (not a regeneration). `profile`
    and `path` (selectors.path_rows): the person's profile and the selected path where the
    caller read them already.

    A chat whose model was deleted or disabled falls back to the default here (with a
    "Switched to" marker, which tabs hear: call once they listen), before the prompt is
    frozen for it; without `may_switch` such a chat reads nothing (None)."""
    model = session_model_choice(session)
    if model is None:
        if not may_switch:
            return None
        model, _notice = session_model_for_turn(session)
    profile = profile or profile_get(user=user)
    memory_on = uses_memory(session, profile)
    prompt = session.system_prompt.prompt if session.system_prompt_id else ""
    if path is None:
        path = path_rows(session_id=session.pk)
    messages = api_messages_of(path, prompt)
    # Every user message of the path reaches the model: they are counted there.
    user_turns = sum(m["role"] == "user" for m in messages) if recalling and memory_on else 0
    return TurnFacts(model, profile, memory_on, prompt, user_turns, messages)
