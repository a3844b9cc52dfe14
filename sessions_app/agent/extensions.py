"""What a conversation asks of the apps above sessions_app.

Memory and skills sit above the conversations: they store rows that point at sessions and
messages, and they use the agent's model client, tool registry and offline loop. Where a
conversation needs them back, it goes through the extension points declared here, which
those apps fill from their ``AppConfig.ready()`` (as they register their tools)::

    memory_providers_register(MemoryManager.for_user)
    prompt_section_register(
        PromptSection("memory_snapshot", 10, memory_snapshot_freeze, memory=True)
    )
    after_turn_register("skill_review", review_after_turn)
    inspector_section_register("skills", skills_inspector_context)

- **memory providers**: a person's providers for one turn, one compression or one ending
  (initialise, prompt block, recall, background sync, their own tools);
- **prompt sections**: blocks of a newly frozen system prompt after the person's own
  instructions, in `order` (the MEMORY/USER snapshot, then the skills index);
- **after-turn jobs**: what learns from a finished turn (the skill review after busy turns);
  they run only when memory is on for the conversation, and never delay the user;
- **inspector sections**: what the conversation inspector shows of memory and skills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured

from ..models import Session
from .tools import ProviderTools


class MemoryProviders(ProviderTools, Protocol):
    """A person's memory providers (Hermes' MemoryManager): the built-in one and the
    deployment's external provider, if any."""

    @property
    def external(self) -> object | None:
        """The external provider, or None when only the built-in memory runs."""
        ...

    def initialize_all(self, session_id: str, **kwargs: Any) -> None: ...

    def system_prompt_block(self) -> str: ...

    def tool_schemas(self) -> list[dict[str, Any]]: ...

    async def turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None: ...

    async def prefetch_context(self, query: str, *, session_id: str) -> tuple[str, list[str]]:
        """The recall for `query`, already fenced, and where it came from."""
        ...

    def in_background(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Call `method` on every provider off the request path."""
        ...

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str: ...


@dataclass(frozen=True)
class PromptSection:
    """A block of a newly frozen system prompt ("" leaves it out)."""

    name: str
    #: Sections follow the person's instructions in ascending order.
    order: int
    #: (*, session: Session, profile: Profile) -> str; `profile` is the owner's, read once
    #: for the whole prompt.
    freeze: Callable[..., str]
    #: Only when memory is on for the conversation (not a temporary chat, not switched off).
    memory: bool = False


#: (*, session_id: str, tool_iterations: int, memory_enabled: bool) -> None, run on the
#: database thread after a final answer of a turn with memory on (memory_enabled: True).
AfterTurn = Callable[..., None]
#: (*, user, session: Session, turns: list) -> context for the inspector's template; it may
#: annotate the turns (the recalled inferences of each user message).
InspectorSection = Callable[..., dict[str, Any]]

_providers: list[Callable[[AbstractBaseUser], MemoryProviders]] = []
_external: list[Callable[[], bool]] = []
_prompt_sections: dict[str, PromptSection] = {}
_after_turn: dict[str, AfterTurn] = {}
_inspector_sections: dict[str, InspectorSection] = {}


def memory_providers_register(
    factory: Callable[[AbstractBaseUser], MemoryProviders],
    *,
    external: Callable[[], bool] = lambda: True,
) -> None:
    """`factory` makes a person's providers for a turn; `external` says, without making
    them, whether the deployment runs an external provider (one that may add to a new
    prompt and must be started first). Unknown: assume it does."""
    _providers[:] = [factory]
    _external[:] = [external]


def memory_providers_external() -> bool:
    """Whether a turn's providers include an external one (see memory_providers_register)."""
    return not _external or _external[0]()


def memory_providers_for(user: AbstractBaseUser) -> MemoryProviders:
    if not _providers:
        raise ImproperlyConfigured("No memory providers registered: is the memory app installed?")
    return _providers[0](user)


def prompt_section_register(section: PromptSection) -> None:
    _prompt_sections[section.name] = section


def prompt_sections() -> list[PromptSection]:
    return sorted(_prompt_sections.values(), key=lambda s: (s.order, s.name))


def after_turn_register(name: str, job: AfterTurn) -> None:
    _after_turn[name] = job


def after_turn_jobs() -> list[tuple[str, AfterTurn]]:
    return sorted(_after_turn.items())


def inspector_section_register(name: str, section: InspectorSection) -> None:
    _inspector_sections[name] = section


def inspector_context(*, user: AbstractBaseUser, session: Session, turns: list) -> dict[str, Any]:
    context: dict[str, Any] = {}
    for _name, section in sorted(_inspector_sections.items()):
        context.update(section(user=user, session=session, turns=turns))
    return context
