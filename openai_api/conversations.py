"""Which stored conversation an OpenAI-style request continues.

A client names it (`X-Hermes-Conversation` or `metadata.conversation_id`), or it resends the
whole history, as stateless clients do. Then the history is matched against the person's
conversations as the client saw them: their user messages, and per turn the text of the
answer (the texts of the turn's assistant messages joined by `ANSWER_SEPARATOR`, exactly as
the endpoint streamed them; tool calls are not shown to the client). The conversation whose
view starts with the client's whole history continues:

- view == history: the new message continues it;
- the view goes on past the history: the client went back (edited or regenerated); the
  next stored user message gets the new one as a new version (the same text: a new
  version of its answer), as Edit and Regenerate do in the chat;
- no conversation holds the whole history (none at all, another model answered part of
  it, an assistant text was changed): a new conversation starts with the client's history
  written first, so the model sees what the client sees.

Everything here acts for `user` and reads only their rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Sum

from accounts.services import quota_check
from model_catalog.selectors import ModelChoice
from sessions_app.lineage import compression_chain, compression_tip
from sessions_app.models import API_SOURCE, Message, Session
from sessions_app.services import access_session, session_open

#: Between the texts of one turn's assistant messages (before and after tool calls).
ANSWER_SEPARATOR = "\n\n"
#: Conversations compared per request: those starting with the client's first message,
#: most recently active first.
CANDIDATES = 20


@dataclass(frozen=True)
class Item:
    """One message as the client sees it; `message_id` is its first stored message."""

    role: str
    text: str
    message_id: int
    session_id: str


@dataclass(frozen=True)
class TurnPlan:
    """What the turn does: a new message in `session_id`, an edit of `message_id` (with
    `text`), or a regeneration of the answer `message_id` (no text)."""

    session_id: str
    text: str | None
    message_id: int | None = None
    regenerate: bool = False


def conversation_items(session: Session) -> list[Item]:
    """The selected path of the conversation `session` belongs to (every compressed part),
    as the client saw it."""
    chain = [part.pk for part in compression_chain(session)]
    rows = (
        Message.objects.filter(
            session_id__in=chain,
            active=True,
            role__in=[Message.Role.USER, Message.Role.ASSISTANT],
            kind=Message.Kind.REGULAR,
        )
        .order_by("id")
        .values_list("id", "session_id", "role", "content")
    )
    items: list[Item] = []
    answer: list[tuple[int, str, str]] = []

    def close_answer() -> None:
        text = ANSWER_SEPARATOR.join(t for _, _, t in answer if t)
        if text:
            items.append(Item("assistant", text, answer[0][0], answer[0][1]))
        answer.clear()

    for mid, session_id, role, content in rows:
        if role == Message.Role.USER:
            close_answer()
            items.append(Item("user", content, mid, session_id))
        else:
            answer.append((mid, session_id, content))
    close_answer()
    return items


def _same(item: Item, message: tuple[str, str]) -> bool:
    return item.role == message[0] and item.text.strip() == message[1].strip()


def _shared(items: list[Item], history: list[tuple[str, str]]) -> int:
    n = 0
    while n < min(len(items), len(history)) and _same(items[n], history[n]):
        n += 1
    return n


def _matching(
    user: AbstractBaseUser, history: list[tuple[str, str]]
) -> tuple[Session | None, list[Item]]:
    """The most recently active conversation of `user` whose view starts with all of
    `history`, with its view; (None, []) when none does."""
    first = history[0][1]
    roots = (
        Message.objects.filter(
            session__owner=user,
            session__temporary=False,
            parent__isnull=True,
            active=True,
            role=Message.Role.USER,
            kind=Message.Kind.REGULAR,
            content=first,
        )
        .order_by("-session__last_activity_at")
        .values_list("session_id", flat=True)[:CANDIDATES]
    )
    for root in Session.objects.filter(pk__in=list(roots)).order_by("-last_activity_at"):
        tip = compression_tip(root)
        items = conversation_items(tip)
        if _shared(items, history) == len(history):
            return tip, items
    return None, []


def conversation_plan(
    *,
    user: AbstractBaseUser,
    messages: list[tuple[str, str]],
    conversation_id: str | None,
    choice: ModelChoice,
) -> TurnPlan:
    """Where the request's last (user) message goes; a new conversation is created (with
    the client's history) when no stored one continues. Raises NotFound for a conversation
    id that is not `user`'s, ServiceError when the daily quota is used up."""
    history, text = messages[:-1], messages[-1][1]
    if conversation_id is not None:
        return TurnPlan(access_session(user=user, session_id=conversation_id).pk, text)
    # An answer in the history makes a match meaningful (a lone "hi" matches too much).
    if any(role == "assistant" for role, _ in history) and history[0][0] == "user":
        session, items = _matching(user, history)
        if session is not None:
            plan = _continue(session, items, len(history), text)
            if plan is not None:
                return plan
    # Checked before anything is written: a refused turn leaves no conversation behind.
    quota_check(user=user)
    session = session_open(
        user=user,
        title_from=next(t for role, t in messages if role == "user"),
        choice=choice,
        source=API_SOURCE,
        history=history,
    )
    return TurnPlan(session.pk, text)


def _continue(session: Session, items: list[Item], shared: int, text: str) -> TurnPlan | None:
    """The plan in `session`, whose view starts with the `shared` history items; None when
    the client went back into a compressed (closed) part, which cannot branch."""
    if len(items) == shared:
        return TurnPlan(session.pk, text)
    following = items[shared]
    if following.role != "user" or following.session_id != session.pk:
        return None
    answer = items[shared + 1] if shared + 1 < len(items) else None
    if following.text.strip() == text.strip() and answer is not None:
        return TurnPlan(session.pk, None, message_id=answer.message_id, regenerate=True)
    return TurnPlan(session.pk, text, message_id=following.message_id)


def turn_usage(*, session_id: str, first_id: int, last_id: int | None) -> dict[str, int]:
    """Tokens of every model call of one turn (its tool rounds included): the assistant
    messages from `first_id` to `last_id` (None: to the end)."""
    rows = Message.objects.filter(
        session_id=session_id, role=Message.Role.ASSISTANT, id__gte=first_id
    )
    if last_id is not None:
        rows = rows.filter(id__lte=last_id)
    totals = rows.aggregate(
        prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens"),
        cached=Sum("cached_tokens"),
    )
    return {key: value or 0 for key, value in totals.items()}
