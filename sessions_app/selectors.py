"""Reads of conversations and messages, always scoped to one owner inside the SQL."""

from __future__ import annotations

import functools
from typing import Any, Literal, NamedTuple

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.utils.translation import gettext_lazy

from accounts.models import Profile
from accounts.selectors import Quota
from accounts.services import TURN_ACCOUNT_LIMITS, turn_account_joins, turn_account_of
from core.db.rows import first_row
from core.exceptions import NotFound

from .models import Message, Session, SystemPrompt

Index = Literal["words", "trigram"]

# (vendor, index) → SQL taking (query, owner id, limit). The owner filter is part of the
# statement, never applied to the results afterwards.
_MATCH_SQL = {
    ("sqlite", "words"): """
        SELECT m.id FROM messages_fts f
        JOIN sessions_app_message m ON m.id = f.rowid
        JOIN sessions_app_session s ON s.id = m.session_id
        WHERE messages_fts MATCH %(q)s AND s.owner_id = %(owner)s
        ORDER BY f.rank LIMIT %(limit)s""",
    ("sqlite", "trigram"): """
        SELECT m.id FROM messages_fts_trigram f
        JOIN sessions_app_message m ON m.id = f.rowid
        JOIN sessions_app_session s ON s.id = m.session_id
        WHERE messages_fts_trigram MATCH %(q)s AND s.owner_id = %(owner)s
        ORDER BY f.rank LIMIT %(limit)s""",
    ("postgresql", "words"): """
        SELECT m.id FROM sessions_app_message m
        JOIN sessions_app_session s ON s.id = m.session_id
        WHERE m.search_vector @@ websearch_to_tsquery('simple', %(q)s)
          AND s.owner_id = %(owner)s
        ORDER BY ts_rank(m.search_vector, websearch_to_tsquery('simple', %(q)s)) DESC
        LIMIT %(limit)s""",
    ("postgresql", "trigram"): r"""
        SELECT m.id FROM sessions_app_message m
        JOIN sessions_app_session s ON s.id = m.session_id
        WHERE m.role <> 'tool' AND m.content ILIKE %(like)s ESCAPE '\'
          AND s.owner_id = %(owner)s
        ORDER BY m.id DESC LIMIT %(limit)s""",
}


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def message_ids_matching(
    *, owner: AbstractBaseUser, fts_query: str, index: Index = "words", limit: int = 50
) -> list[int]:
    """Ids of the owner's messages that a full-text index matches, best first.

    `fts_query` must already be sanitised (the search service does that); this is the raw
    index access, shared by search and by the tests that prove the indexes stay in sync.
    """
    sql = _MATCH_SQL[(connection.vendor, index)]
    params = {
        "q": fts_query,
        "like": f"%{escape_like(fts_query)}%",
        "owner": owner.pk,
        "limit": limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


class PathRow(NamedTuple):
    """A message of the selected path as `path_rows` reads it: what the model is sent, and
    what a new message's parent is asked (its status, the usage of its call)."""

    id: int
    role: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    content: str
    context_block: str
    tool_calls: Any  # as stored: api_messages_of decodes it
    tool_call_id: str


_PATH_SQL = """
    SELECT id, role, status, prompt_tokens, completion_tokens, content, context_block,
           tool_calls, tool_call_id
    FROM sessions_app_message WHERE session_id = %s AND active = %s"""


def path_rows(*, session_id: str, upto: int | None = None) -> list[PathRow]:
    """The selected path of a conversation in order; with `upto`, only messages with ids
    up to it. The last row is the path's tip (branches.path_tip); `api_messages_of` turns
    the rows into what the model receives. Read on a cursor, as every turn reads it before
    its model call: the ORM's `values()` took three times as long as the read itself on a
    60-message path, growing with it."""
    sql = _PATH_SQL + (" AND id <= %s" if upto is not None else "") + " ORDER BY id"
    params: list[Any] = [session_id, True]
    if upto is not None:
        params.append(upto)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(map(PathRow._make, cursor.fetchall()))


def api_messages(
    *, session_id: str, system_prompt: str, upto: int | None = None
) -> list[dict[str, Any]]:
    """The conversation as the model receives it (`api_messages_of` its `path_rows`)."""
    return api_messages_of(path_rows(session_id=session_id, upto=upto), system_prompt)


def api_messages_of(rows: list[PathRow], system_prompt: str) -> list[dict[str, Any]]:
    """The frozen system prompt, then every message of the selected path (`path_rows`;
    other branches never reach the model) in order, byte-for-byte the same as in earlier
    calls (so each request extends the previous one and the provider's prefix cache keeps
    hitting).

    User messages carry the recall fence they were first sent with. System markers, empty
    assistant placeholders and unmatched tool calls/results are left out: the API refuses
    a tool call without its result (a crash mid-call can leave one behind)."""
    answered = {row.tool_call_id for row in rows if row.role == Message.Role.TOOL}
    decode = Message._meta.get_field("tool_calls").from_db_value
    called: set[str] = set()
    out: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    for row in rows:
        if row.role == Message.Role.USER:
            content = row.content
            if row.context_block:
                content = f"{content}\n\n{row.context_block}"
            out.append({"role": "user", "content": content})
        elif row.role == Message.Role.ASSISTANT:
            requested = decode(row.tool_calls, None, connection) or []
            calls = [c for c in requested if c.get("id") in answered]
            if not calls and not row.content:
                continue
            message: dict[str, Any] = {"role": "assistant", "content": row.content or None}
            if calls:
                message["tool_calls"] = calls
                called.update(c["id"] for c in calls)
            out.append(message)
        elif row.role == Message.Role.TOOL and row.tool_call_id in called:
            out.append({"role": "tool", "tool_call_id": row.tool_call_id, "content": row.content})
    return out


def access_session(
    *, user: AbstractBaseUser, session_id: Any, with_prompt: bool = False
) -> Session:
    """The user's session with that id; NotFound for missing and for other users' ids.
    `with_prompt`: its frozen system prompt comes in the same query (a turn sends it).

    Every turn and most requests about a conversation start here: read on a cursor, which
    builds the same instance without compiling a query each time (the ORM's
    `.filter().first()` took three times as long as the read)."""
    return _session_row(user, session_id, prompt=with_prompt, account=False)[0]


def turn_session_read(*, user: AbstractBaseUser, session_id: Any) -> tuple[Session, Quota, Profile]:
    """What a later turn reads before its lease, in one statement: the conversation with its
    frozen prompt (`access_session`) and the person's daily limits and profile
    (accounts.services.turn_account); on PostgreSQL each read is a round trip to another
    process, and the first one after a pause is the slowest."""
    session, profile, _prompt, messages, tokens = _session_row(
        user, session_id, prompt=True, account=True
    )
    quota, profile = turn_account_of(user=user, profile=profile, messages=messages, tokens=tokens)
    return session, quota, profile


def _session_row(user: AbstractBaseUser, session_id: Any, *, prompt: bool, account: bool) -> list:
    """The row of `access_session` or `turn_session_read`: the session (its frozen prompt
    set on it when read), the profile where the account is read, then the other columns."""
    if not isinstance(session_id, str) or not session_id:
        raise NotFound(gettext_lazy("conversation"))
    row = first_row(
        _session_read_sql(prompt=prompt, account=account),
        [session_id, user.pk],
        (Session, "s"),
        *([(Profile, "ap")] if account else []),
    )
    if row is None:
        raise NotFound(gettext_lazy("conversation"))
    session, text = row[0], row[1 + account] if prompt else None
    if text is not None:
        session.system_prompt = SystemPrompt.from_db(
            session._state.db, ["hash", "prompt"], [session.system_prompt_id, text]
        )
    return row


@functools.cache
def _session_read_sql(*, prompt: bool, account: bool) -> str:
    """`_session_row`'s statement after the parts' columns."""
    columns = joins = ""
    if prompt:
        columns += ", p.prompt"
        joins += " LEFT JOIN sessions_app_systemprompt p ON p.hash = s.system_prompt_id"
    if account:
        columns += TURN_ACCOUNT_LIMITS
        joins += turn_account_joins("s.owner_id")
    return f"{columns} FROM sessions_app_session s{joins} WHERE s.id = %s AND s.owner_id = %s"
