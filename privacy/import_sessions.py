"""Conversations from a Hermes state.db (see hermes_import.py for the whole import):
sessions with their titles, lineage and counters, and their live messages, checked row by
row; plus the settings an export of this app keeps in a side table.

A foreign database is data, never code: SQLite hands over each text value cut to its field's
cap (`substr` in the query, so Python never holds more), the cuts are counted for the report,
and the whole import stops once it has read `read_budget()` characters.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy

from core.exceptions import lazy_format
from sessions_app.titles import title_not_in

from . import statedb
from .import_caps import (
    CONFIG_MAX,
    PROMPT_MAX,
    SHORT_MAX,
    TITLE_MAX,
    read_budget,
    reported_cuts,
    text_max,
)
from .import_report import HermesImportReport

SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")
ROLES = {"system", "user", "assistant", "tool"}
STATUSES = {"streaming", "complete", "interrupted", "failed"}
KINDS = {"", "summary", "carried"}
#: How Hermes' compaction handoffs begin: its summary prefix ("[CONTEXT COMPACTION — REFERENCE
#: ONLY] Earlier turns were compacted…", one line before the summary) and the legacy one.
HERMES_SUMMARY_TAG = "[CONTEXT COMPACTION"
HERMES_LEGACY_SUMMARY_TAG = "[CONTEXT SUMMARY]:"
_BATCH = 500
#: Messages are also written out once a batch holds this many characters.
_BATCH_CHARS = 4 * 1024 * 1024


def hermes_summary(content: str, *, flagged: bool) -> str | None:
    """The summary carried by a Hermes compaction handoff, without Hermes' framing, or None
    when `content` is an ordinary message. `flagged`: the row's `_compressed_summary` column
    says it is a summary whatever its text."""
    from sessions_app.compression import SUMMARY_SUFFIX

    text = content.strip()
    if text.startswith(HERMES_LEGACY_SUMMARY_TAG):
        body = text.removeprefix(HERMES_LEGACY_SUMMARY_TAG)
    elif text.startswith(HERMES_SUMMARY_TAG):
        # The prefix is one line of instructions; a short handoff is only that line.
        first, _, rest = text.partition("\n")
        body = rest if rest.strip() else first[first.find("]") + 1 :]
    elif flagged:
        body = text
    else:
        return None
    return body.strip().removesuffix(SUMMARY_SUFFIX).strip() or text


class ReadBudgetExceeded(Exception):
    pass


def _capped(expr: str, alias: str, cap: int) -> str:
    """A select item: `expr` as is for numbers, cut to `cap` for text and blobs, plus a
    `<alias>__cut` flag when the value was longer."""
    return (
        f"CASE WHEN typeof({expr}) IN ('text', 'blob') THEN substr({expr}, 1, {cap}) "
        f'ELSE {expr} END AS "{alias}", length({expr}) > {cap} AS "{alias}__cut"'
    )


def _select(alias: str, columns: Iterable[str], caps: dict[str, int]) -> str:
    return ", ".join(
        _capped(f'{alias}."{c}"', c, caps.get(c, SHORT_MAX)) for c in columns if c.isidentifier()
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value).replace("\x00", "")


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value or 0)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def _col(row: sqlite3.Row, name: str, default: Any = None) -> Any:
    return row[name] if name in row.keys() else default


def import_id(source_id: str, started: Any) -> tuple[str, dict[str, Any]]:
    """The id of an imported conversation: its own when that is free and storable, else a
    fresh one (from its start time), with the original remembered for re-imports."""
    from sessions_app.models import Session, new_session_id

    if SESSION_ID.match(source_id) and not Session.objects.filter(pk=source_id).exists():
        return source_id, {}
    # Taken (by another account, e.g. the same export imported twice on one site) or
    # not an id we can store.
    while True:
        candidate = new_session_id()
        if started is not None:
            candidate = f"{started:%Y%m%d_%H%M%S}_{candidate[-6:]}"
        if not Session.objects.filter(pk=candidate).exists():
            return candidate, {"imported_from": source_id}


class SessionImporter:
    def __init__(self, user: AbstractBaseUser, conn: sqlite3.Connection) -> None:
        from sessions_app.models import Session

        self.user = user
        self.conn = conn
        self.report = HermesImportReport()
        self.sides = {t for t in statedb.SIDE_TABLES if statedb.has_table(conn, t)}
        self.session_columns = statedb.table_columns(conn, "sessions")
        self.message_columns = statedb.table_columns(conn, "messages")
        long = text_max()
        self.session_caps = {"title": TITLE_MAX, "model_config": CONFIG_MAX,
                             "system_prompt": PROMPT_MAX}  # fmt: skip
        self.message_caps = {"content": long, "tool_calls": long, "reasoning": long,
                             "reasoning_content": long}  # fmt: skip
        self.reported = reported_cuts()
        self.budget = read_budget()
        self.read = 0
        #: source session id → our session id, for everything already in the account.
        self.known: dict[str, str] = {}
        for sid, config in Session.objects.filter(owner=user).values_list("id", "model_config"):
            self.known[sid] = sid
            source = (config or {}).get("imported_from") if isinstance(config, dict) else None
            if isinstance(source, str):
                self.known[source] = sid
        self.titles = set(
            Session.objects.filter(owner=user, title__isnull=False).values_list("title", flat=True)
        )
        self.prompts: dict[str, str | None] = {}

    def _take(self, row: sqlite3.Row | None) -> sqlite3.Row | None:
        """Count what `row` holds against the budget and its cut fields for the report."""
        if row is None:
            return None
        for key in row.keys():
            value = row[key]
            if isinstance(value, str | bytes):
                self.read += len(value)
            elif value and key.endswith("__cut") and key.removesuffix("__cut") in self.reported:
                self.report.cut(self.reported[key.removesuffix("__cut")])
        if self.read > self.budget:
            raise ReadBudgetExceeded
        return row

    def _prompt(self, row: sqlite3.Row) -> Any:
        from sessions_app.models import SystemPrompt

        text = None
        digest = _col(row, "system_prompt_hash")
        if digest and statedb.has_table(self.conn, "system_prompts"):
            found = self._take(
                self.conn.execute(
                    f"SELECT {_capped('prompt', 'prompt', PROMPT_MAX)} "  # noqa: S608
                    "FROM system_prompts WHERE hash = ?",
                    (digest,),
                ).fetchone()
            )
            text = found[0] if found else None
        if text is None:
            text = _col(row, "system_prompt")
        if not text:
            return None
        text = _text(text)
        prompt, _ = SystemPrompt.objects.get_or_create(
            hash=SystemPrompt.digest(text), defaults={"prompt": text}
        )
        return prompt

    def run(self) -> HermesImportReport:
        from sessions_app.models import Session

        created: dict[str, str | None] = {}  # our id → source parent id
        columns = _select("s", self.session_columns, self.session_caps)
        sql = f"SELECT {columns} FROM sessions s ORDER BY s.started_at, s.id"  # noqa: S608
        for raw in self.conn.execute(sql):
            try:
                row = self._take(raw)
            except ReadBudgetExceeded:
                self._stopped()
                break
            source_id = _text(row["id"])
            if source_id in self.known:
                self.report.sessions_skipped += 1
                continue
            try:
                with transaction.atomic():
                    session = self._session(row, source_id)
                    self._messages(row, session)
            except ReadBudgetExceeded:
                self._stopped(source_id)
                break
            except (IntegrityError, ValueError, sqlite3.Error) as exc:
                self.report.errors.append(
                    lazy_format(
                        gettext_lazy("Conversation %(id)s: not imported (%(error)s)."),
                        id=source_id,
                        error=str(exc),
                    )
                )
                continue
            self.known[source_id] = session.pk
            created[session.pk] = _text(_col(row, "parent_session_id")) or None
            self.report.sessions_created += 1
        # Lineage last: a parent may come later in the file than its child.
        for our_id, parent in created.items():
            if parent and parent in self.known and self.known[parent] != our_id:
                Session.objects.filter(pk=our_id, owner=self.user).update(
                    parent_id=self.known[parent]
                )
        return self.report

    def _stopped(self, source_id: str = "") -> None:
        values = {"id": source_id, "mib": f"{self.budget // (1024 * 1024):,}"}
        if source_id:
            template = gettext_lazy(
                "Stopped at conversation %(id)s: the import read %(mib)s MiB of text from "
                "state.db, the limit for one import. The conversations before it were imported; "
                "import the rest with `manage.py import_hermes` and a higher HERMES_IMPORT_MAX_MB."
            )
        else:
            template = gettext_lazy(
                "Stopped: the import read %(mib)s MiB of text from state.db, the limit for one "
                "import. The conversations before it were imported; import the rest with "
                "`manage.py import_hermes` and a higher HERMES_IMPORT_MAX_MB."
            )
        self.report.errors.append(lazy_format(template, **values))

    def _session(self, row: sqlite3.Row, source_id: str) -> Any:
        from sessions_app.models import Session

        started = statedb.from_epoch(row["started_at"])
        if started is None:
            raise ValueError("it has no start time")
        ended = statedb.from_epoch(_col(row, "ended_at"))
        if ended is not None and ended < started:
            ended = started
        session_id, marker = import_id(source_id, started)
        config = statedb.parse_json(_col(row, "model_config"))
        config = config if isinstance(config, dict) else {}
        config.update(marker)
        title = _text(_col(row, "title")).strip() or None
        if title is not None:
            title = title_not_in(title, self.titles)
            self.titles.add(title)
        temporary = False
        if "hermes_web_sessions" in self.sides:
            extra = self.conn.execute(
                "SELECT temporary FROM hermes_web_sessions WHERE id = ?", (source_id,)
            ).fetchone()
            temporary = bool(extra and extra[0])
        return Session.objects.create(
            id=session_id,
            owner=self.user,
            source=_text(_col(row, "source")) or "hermes",
            model=_text(_col(row, "model"))[:200],
            model_config=config,
            system_prompt=self._prompt(row),
            started_at=started,
            ended_at=ended,
            end_reason=_text(_col(row, "end_reason"))[:32],
            message_count=_int(_col(row, "message_count")),
            tool_call_count=_int(_col(row, "tool_call_count")),
            api_call_count=_int(_col(row, "api_call_count")),
            input_tokens=_int(_col(row, "input_tokens")),
            output_tokens=_int(_col(row, "output_tokens")),
            cache_read_tokens=_int(_col(row, "cache_read_tokens")),
            cache_write_tokens=_int(_col(row, "cache_write_tokens")),
            reasoning_tokens=_int(_col(row, "reasoning_tokens")),
            estimated_cost_usd=_decimal(_col(row, "estimated_cost_usd")),
            title=title,
            title_source=_text(_col(row, "title_source"))[:16],
            last_activity_at=statedb.from_epoch(_col(row, "last_activity_at")) or started,
            archived=bool(_col(row, "archived", 0)),
            pinned=bool(_col(row, "pinned", 0)),
            temporary=temporary,
            compression_failure_error=_text(_col(row, "compression_failure_error"))[:300],
            compression_cooldown_until=statedb.from_epoch(
                _col(row, "compression_failure_cooldown_until")
            ),
        )

    def _message_rows(self, source_id: str) -> Iterable[sqlite3.Row]:
        where = "m.session_id = ?"
        # Live rows only: compaction-archived and rewound rows are not part of the
        # conversation Hermes continues from.
        if "active" in self.message_columns:
            where += " AND m.active = 1"
        columns = _select("m", self.message_columns, self.message_caps)
        if "hermes_web_messages" in self.sides:
            extra = [("kind", "x_kind"), ("status", "x_status"), ("model", "x_model"),
                     ("prompt_tokens", "x_prompt"), ("completion_tokens", "x_completion"),
                     ("cached_tokens", "x_cached"), ("reasoning_tokens", "x_reasoning"),
                     ("cost_usd", "x_cost")]  # fmt: skip
            columns += ", " + ", ".join(
                [_capped(f"x.{c}", alias, SHORT_MAX) for c, alias in extra]
                + [_capped("x.context_block", "x_context", text_max())]
            )
            sql = (
                f"SELECT {columns} FROM messages m "  # noqa: S608 - names from table_info
                "LEFT JOIN hermes_web_messages x ON x.id = m.id "
                f"WHERE {where} ORDER BY m.id"
            )
        else:
            sql = f"SELECT {columns} FROM messages m WHERE {where} ORDER BY m.id"  # noqa: S608
        return (self._take(row) for row in self.conn.execute(sql, (source_id,)))

    def _messages(self, row: sqlite3.Row, session: Any) -> None:
        from sessions_app.branches import path_link_new_session
        from sessions_app.compression import summary_content
        from sessions_app.models import Message

        source_id = _text(row["id"])
        carried = self._parent_texts(row)
        skipped_roles = 0
        batch: list[Message] = []
        batch_chars = 0
        for m in self._message_rows(source_id):
            role = _text(m["role"])
            if role not in ROLES:
                skipped_roles += 1
                continue
            content = _text(m["content"])
            tool_calls = statedb.parse_json(_col(m, "tool_calls"))
            kind = _text(_col(m, "x_kind")) if _col(m, "x_kind") is not None else None
            if kind is None:
                flagged = bool(_col(m, "_compressed_summary", 0))
                summary = hermes_summary(content, flagged=flagged)
                # A tool's output that happens to begin like a handoff stays what it is.
                if summary is not None and (flagged or role in ("user", "assistant")):
                    # Stored as this app's own summaries are, so the chat shows it as the
                    # summary and a later compression builds on it.
                    kind, content = "summary", summary_content(summary)
                elif (role, content) in carried:
                    kind = "carried"
                else:
                    kind = ""
            status = _text(_col(m, "x_status")) if _col(m, "x_status") is not None else None
            if status is None:
                status = "complete" if role == "assistant" else ""
            if role != "assistant" or status not in STATUSES:
                status = "" if role != "assistant" else "complete"
            message = Message(
                session=session,
                role=role,
                content=content,
                tool_call_id=_text(_col(m, "tool_call_id"))[:200]
                or ("missing" if role == "tool" else ""),
                tool_calls=tool_calls if isinstance(tool_calls, list | dict) else None,
                tool_name=_text(_col(m, "tool_name"))[:200],
                timestamp=statedb.from_epoch(m["timestamp"]) or session.started_at,
                token_count=_int(_col(m, "token_count")) if _col(m, "token_count") else None,
                finish_reason=_text(_col(m, "finish_reason"))[:32],
                reasoning=_text(_col(m, "reasoning") or _col(m, "reasoning_content")),
                status=status,
                kind=kind if kind in KINDS else "",
                context_block=_text(_col(m, "x_context")),
                model=_text(_col(m, "x_model"))[:200],
                prompt_tokens=_int(_col(m, "x_prompt")),
                completion_tokens=_int(_col(m, "x_completion")),
                cached_tokens=_int(_col(m, "x_cached")),
                reasoning_tokens=_int(_col(m, "x_reasoning")),
                cost_usd=_decimal(_col(m, "x_cost")),
            )
            batch.append(message)
            batch_chars += len(content) + len(message.reasoning) + len(message.context_block)
            if len(batch) >= _BATCH or batch_chars >= _BATCH_CHARS:
                Message.objects.bulk_create(batch)
                self.report.messages_created += len(batch)
                batch, batch_chars = [], 0
        if batch:
            Message.objects.bulk_create(batch)
            self.report.messages_created += len(batch)
        path_link_new_session(session_id=session.pk)
        self._count_rewound(source_id)
        if skipped_roles:
            self.report.warnings.append(
                lazy_format(
                    gettext_lazy(
                        "Conversation %(id)s: %(count)s message(s) with an unknown role were "
                        "skipped."
                    ),
                    id=source_id,
                    count=skipped_roles,
                )
            )

    def _count_rewound(self, source_id: str) -> None:
        """Rewound rows (other branches: active 0, compacted 0) are not imported; say so."""
        if not {"active", "compacted"} <= set(self.message_columns):
            return
        (rewound,) = self.conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = ? AND active = 0 AND compacted = 0",
            (source_id,),
        ).fetchone()
        if rewound:
            self.report.warnings.append(
                lazy_format(
                    gettext_lazy(
                        "Conversation %(id)s: %(count)s message(s) on other branches (rewound) "
                        "were not imported; the selected path was."
                    ),
                    id=source_id,
                    count=rewound,
                )
            )

    def _parent_texts(self, row: sqlite3.Row) -> set[tuple[str, str]]:
        """For a Hermes compression continuation (no side table): the (role, content) of the
        parent's messages, to recognise the ones carried over into the child."""
        if "hermes_web_messages" in self.sides:
            return set()
        parent = _col(row, "parent_session_id")
        if not parent:
            return set()
        ended = self.conn.execute(
            "SELECT end_reason FROM sessions WHERE id = ?", (parent,)
        ).fetchone()
        if not ended or ended[0] != "compression":
            return set()
        sql = (
            f"SELECT {_capped('role', 'role', SHORT_MAX)}, "  # noqa: S608 - constants
            f"{_capped('content', 'content', text_max())} FROM messages WHERE session_id = ?"
        )
        # The carried copies were cut the same way, so they still compare equal. Flags are
        # not counted here: the parent's own import reports its cuts.
        texts = set()
        for r in self.conn.execute(sql, (parent,)):
            self.read += len(_text(r[0])) + len(_text(r[2]))
            if self.read > self.budget:
                raise ReadBudgetExceeded
            texts.add((_text(r[0]), _text(r[2])))
        return texts


def profile_settings_import(
    user: AbstractBaseUser, conn: sqlite3.Connection, report: HermesImportReport
) -> None:
    """Settings from an export of this app (state.db side table); only filled in where the
    account has none yet, so an import never overwrites what the person set here."""
    from accounts.services import profile_get

    if not statedb.has_table(conn, "hermes_web_profile"):
        return
    rows = conn.execute(
        f"SELECT {_capped('key', 'key', SHORT_MAX)}, "  # noqa: S608 - constants
        f"{_capped('value', 'value', text_max())} FROM hermes_web_profile LIMIT 100"
    ).fetchall()
    values = {row[0]: (row[2], row[3]) for row in rows}
    profile = profile_get(user=user)
    changed = []
    instructions, cut = values.get("custom_instructions", (None, 0))
    if instructions and not profile.custom_instructions:
        profile.custom_instructions = _text(instructions)
        changed.append("custom_instructions")
        if cut:
            report.cut(reported_cuts()["value"])
    if changed:
        profile.save(update_fields=changed)
