"""factory_boy factories for the objects tests build again and again: users, conversations
(sessions_app.Session) and their messages, memory entries, skills and inferences.

Each builds one valid row with the least a test has to say; pass what the test is about
(`MessageFactory(session=chat, role="tool", tool_name="memory")`). Skills go through
`skill_create`, so a factory-made skill is parsed and validated like a real one.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model

from memory.inferences.guard import statement_digest
from memory.models import Inference, MemoryEntry, content_digest
from sessions_app.models import Message, Session

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    """A member who can log in with PASSWORD; `staff=True` / `superuser=True` for admins."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    class Params:
        staff = factory.Trait(is_staff=True)
        superuser = factory.Trait(is_staff=True, is_superuser=True)

    username = factory.Sequence(lambda n: f"member{n}")
    email = ""
    password = factory.django.Password(PASSWORD)


class SessionFactory(factory.django.DjangoModelFactory):
    """A conversation of `owner` (a new member unless given)."""

    class Meta:
        model = Session

    owner = factory.SubFactory(UserFactory)
    title = None  # as a new chat starts


class MessageFactory(factory.django.DjangoModelFactory):
    """A user message in `session`; assistant messages default to complete."""

    class Meta:
        model = Message

    session = factory.SubFactory(SessionFactory)
    role = "user"
    content = factory.Sequence(lambda n: f"Message {n}.")
    status = factory.LazyAttribute(lambda m: "complete" if m.role == "assistant" else "")
    # Continues the session's selected path, as the chat's services do.
    parent = factory.LazyAttribute(
        lambda m: Message.objects.filter(session=m.session, active=True).order_by("-id").first()
    )


def conversation_with(owner: Any, *texts: str, **fields: Any) -> Session:
    """A session of `owner` where each of `texts` is a user message answered by the
    assistant ("Answer 0.", "Answer 1.", ...)."""
    session = SessionFactory(owner=owner, **fields)
    for i, text in enumerate(texts):
        MessageFactory(session=session, role="user", content=text)
        MessageFactory(session=session, role="assistant", content=f"Answer {i}.")
    return session


class MemoryEntryFactory(factory.django.DjangoModelFactory):
    """An active MEMORY entry (`target="user"` for the USER profile), written directly:
    tests of the store's limits and scanner call memory_add instead."""

    class Meta:
        model = MemoryEntry

    owner = factory.SubFactory(UserFactory)
    target = "memory"
    content = factory.Sequence(lambda n: f"Fact number {n}.")
    content_hash = factory.LazyAttribute(lambda e: content_digest(e.content))


def skill_md(
    name: str,
    description: str = "How to do the thing, step by step.",
    body: str = "# Steps\n\n1. Check the state.\n2. Do the thing.\n3. Verify it worked.",
    extra: str = "",
) -> str:
    """A valid SKILL.md text (`extra` adds frontmatter lines)."""
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n"


class SkillFactory(factory.Factory):
    """A skill of `owner`, created through skill_create (so parsed and validated)."""

    class Meta:
        model = dict  # built by _create below

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"skill-{n}")
    description = "How to do the thing, step by step."
    category = ""

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Any:
        from skills_app.services import skill_create

        content = kwargs.pop("content", None) or skill_md(kwargs["name"], kwargs["description"])
        return skill_create(user=kwargs["owner"], content=content, category=kwargs["category"])


class InferenceFactory(factory.django.DjangoModelFactory):
    """An inference the local provider holds about `owner` (confidence 0.8)."""

    class Meta:
        model = Inference

    owner = factory.SubFactory(UserFactory)
    statement = factory.Sequence(lambda n: f"Likes topic number {n}")
    statement_hash = factory.LazyAttribute(lambda i: statement_digest(i.statement))
    confidence = Decimal("0.800")
