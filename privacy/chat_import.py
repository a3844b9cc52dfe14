"""Import a ChatGPT or Claude data export (the zip, or its `conversations.json`) into a
user's account, so the history is searched like any other conversation.

The format is told from the content (the first conversation's shape), never the file name.
The JSON is streamed with ijson: one conversation is held at a time. Two passes over the
file: the first checks every conversation (valid JSON, the format's shape, a sound message
tree) and refuses the whole file — nothing imported — at the first fault; the second stores
each conversation in its own transaction, so an interrupted import is resumed by running it
again.

Re-importing adds nothing: a conversation remembers its export id, the id of the export's
current message and a digest of the export's messages (`Session.model_config`
`external_id` / `external_last` / `external_tree`); a newer export adds the conversations
it did not have, and what changed in one it had is merged into its message tree
(chat_merge: new replies, new branches off older messages, the selected path following the
export's).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

import ijson
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.exceptions import ServiceError, Text, lazy_format
from core.zipfiles import zip_errors
from sessions_app.models import IMPORT_SOURCES as SOURCES
from sessions_app.titles import title_not_in

from .chat_formats import BadExport, Imported, chatgpt, claude, skipped_kind, stored_id
from .chat_merge import conversation_merge, tree_digest
from .import_caps import TITLE_MAX, read_budget, reported_cuts, text_max
from .import_report import HermesImportReport
from .import_sessions import import_id

FORMATS = (chatgpt, claude)
EXPORT_NAME = "conversations.json"
_CHUNK = 1024 * 1024
_BATCH = 500
#: The report names at most this many kinds of skipped content, and this many warnings.
SKIPPED_KINDS = 30
OTHER_KINDS = skipped_kind(gettext_lazy("other kinds of content (a placeholder names each)"))
NO_TEXT = skipped_kind(gettext_lazy("conversations without any text"))
WARNINGS_MAX = 20

Progress = Callable[[int, int], None]


class _Member(io.RawIOBase):
    """A zip member as a stream whose read errors are one refusal (core.zipfiles)."""

    def __init__(self, member: IO[bytes], name: str) -> None:
        self.member, self.name = member, name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with zip_errors(self.name):
            data = self.member.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _too_large(size: int) -> ServiceError:
    return ServiceError(
        "too_large",
        lazy_format(
            gettext_lazy(
                "%(name)s holds %(size)s MiB, more than the %(budget)s MiB one import reads "
                "(4 × HERMES_IMPORT_MAX_MB)."
            ),
            name=EXPORT_NAME,
            size=f"{size / (1024 * 1024):,.0f}",
            budget=f"{read_budget() // (1024 * 1024):,}",
        ),
    )


@contextmanager
def open_export(path: Path) -> Iterator[io.BufferedReader]:
    """The bytes of `conversations.json`: the file itself, or that member of a zip (the
    shallowest one). Its size is checked before anything is read."""
    if zipfile.is_zipfile(path):
        with zip_errors():
            archive = zipfile.ZipFile(path)
        with archive:
            found = [
                i
                for i in archive.infolist()
                if not i.is_dir() and PurePosixPath(i.filename).name == EXPORT_NAME
            ]
            if not found:
                raise ServiceError(
                    "invalid",
                    lazy_format(
                        gettext_lazy("No %(name)s in that zip: is it a ChatGPT or Claude export?"),
                        name=EXPORT_NAME,
                    ),
                )
            info = min(found, key=lambda i: i.filename.count("/"))
            if info.file_size > read_budget():
                raise _too_large(info.file_size)
            with zip_errors(info.filename):
                member = archive.open(info)
            with member:
                yield io.BufferedReader(_Member(member, info.filename), _CHUNK)
        return
    size = path.stat().st_size
    if size > read_budget():
        raise _too_large(size)
    with path.open("rb", buffering=_CHUNK) as handle:
        yield handle


def _objects(stream: io.BufferedReader) -> Iterator[dict[str, Any]]:
    """The conversations of a `conversations.json`, one at a time."""
    head = stream.peek(4)[:3]
    if head == b"\xef\xbb\xbf":
        stream.read(3)
    while (first := stream.peek(1)[:1]) and first.isspace():
        stream.read(1)
    if first != b"[":
        raise ServiceError(
            "invalid_json",
            lazy_format(
                gettext_lazy(
                    "That is not a ChatGPT or Claude %(name)s: it should be a JSON list of "
                    "conversations."
                ),
                name=EXPORT_NAME,
            ),
        )
    count = 0
    try:
        for item in ijson.items(stream, "item", use_float=True):
            count += 1
            if not isinstance(item, dict):
                raise ServiceError(
                    "invalid",
                    lazy_format(
                        gettext_lazy(
                            "Nothing was imported: item %(count)s of the list is not a "
                            "conversation."
                        ),
                        count=count,
                    ),
                )
            yield item
    except ijson.JSONError as exc:
        raise ServiceError(
            "invalid_json",
            lazy_format(
                gettext_lazy(
                    "Nothing was imported: the file is not valid JSON after %(count)s "
                    "conversation(s) (%(error)s)."
                ),
                count=f"{count:,}",
                error=str(exc)[:120],
            ),
        ) from None


def _where(index: int, conversation: dict[str, Any]) -> Text:
    title = conversation.get("title") or conversation.get("name")
    if isinstance(title, str):
        return lazy_format(
            gettext_lazy("conversation %(index)s (%(title)s)"), index=index, title=repr(title[:60])
        )
    return lazy_format(gettext_lazy("conversation %(index)s"), index=index)


def parsed(path: Path) -> Iterator[Imported]:
    """Every conversation of the export, parsed; ServiceError at the first fault."""
    fmt = None
    with open_export(path) as stream:
        for index, conversation in enumerate(_objects(stream), start=1):
            if fmt is None:
                fmt = next((f for f in FORMATS if f.looks_like(conversation)), None)
                if fmt is None:
                    raise ServiceError(
                        "invalid",
                        gettext_lazy(
                            "Nothing was imported: the conversations are neither ChatGPT's "
                            "(with a `mapping`) nor Claude's (with `chat_messages`)."
                        ),
                    )
            elif not fmt.looks_like(conversation):
                raise ServiceError(
                    "invalid",
                    lazy_format(
                        gettext_lazy(
                            "Nothing was imported: %(where)s is not a %(source)s conversation "
                            "like the ones before it."
                        ),
                        where=_where(index, conversation),
                        source=SOURCES[fmt.SOURCE],
                    ),
                )
            try:
                yield fmt.parse(conversation, _where(index, conversation))
            except BadExport as exc:
                raise ServiceError(
                    "invalid",
                    lazy_format(gettext_lazy("Nothing was imported: %(error)s."), error=exc.text),
                ) from None


class _Importer:
    def __init__(self, user: AbstractBaseUser) -> None:
        from sessions_app.models import Session

        self.user = user
        self.report = HermesImportReport()
        self.cuts = reported_cuts()
        #: Warnings past WARNINGS_MAX, counted instead.
        self.unsaid = 0
        #: "<source>:<export id>" → (our session id, the digest of what was imported).
        self.known: dict[str, tuple[str, str]] = {}
        for sid, config in Session.objects.filter(owner=user, source__in=SOURCES).values_list(
            "id", "model_config"
        ):
            config = config if isinstance(config, dict) else {}
            if isinstance(config.get("external_id"), str):
                self.known[config["external_id"]] = (sid, str(config.get("external_tree", "")))
        self.titles = set(
            Session.objects.filter(owner=user, title__isnull=False).values_list("title", flat=True)
        )

    def _warn(self, note: Text) -> None:
        if len(self.report.warnings) < WARNINGS_MAX:
            self.report.warnings.append(note)
        else:
            self.unsaid += 1

    def finish(self) -> HermesImportReport:
        if self.unsaid:
            self.report.warnings.append(
                lazy_format(
                    gettext_lazy(
                        "… and %(count)s more conversation(s) like these, left as they were."
                    ),
                    count=f"{self.unsaid:,}",
                )
            )
        return self.report

    def _capped(self, text: str) -> str:
        if len(text) > text_max():
            self.report.cut(self.cuts["content"])
            return text[: text_max()]
        return text

    @staticmethod
    def _cut(text: str) -> str:
        return text[: text_max()]

    def _messages(self, session: Any, items: list, after: datetime) -> tuple[list, datetime]:
        from sessions_app.models import Message

        out = []
        for item in items:
            after = item.timestamp or after
            out.append(
                Message(
                    session=session,
                    role=item.role,
                    content=self._capped(item.content),
                    timestamp=after,
                    status="complete" if item.role == "assistant" else "",
                )
            )
        return out, after

    def add(self, conv: Imported) -> None:
        self.report.chat_source = conv.source
        for what, n in conv.skipped.items():
            if what not in self.report.skipped and len(self.report.skipped) >= SKIPPED_KINDS:
                what = OTHER_KINDS  # an export that makes up kinds does not make the report long
            self.report.skipped[what] = self.report.skipped.get(what, 0) + n
        key = stored_id(f"{conv.source}:{conv.ext_id}")
        if key in self.known:
            self._update(key, conv)
            return
        if not conv.messages:
            self.report.skipped[NO_TEXT] = self.report.skipped.get(NO_TEXT, 0) + 1
            return
        with transaction.atomic():
            self._create(key, conv)

    def _create(self, key: str, conv: Imported) -> None:
        from sessions_app.branches import path_link_new_session
        from sessions_app.models import Message, Session

        started = conv.created or conv.messages[0].timestamp or timezone.now()
        title = conv.title or None
        if title is not None:
            if len(title) > TITLE_MAX:
                self.report.cut(self.cuts["title"])
            title = title_not_in(title, self.titles)
            self.titles.add(title)
        session_id, _ = import_id("", started)
        last = stored_id(conv.messages[-1].ext_id)
        digest = tree_digest(conv)
        session = Session.objects.create(
            id=session_id,
            owner=self.user,
            source=conv.source,
            title=title,
            title_source=Session.TitleSource.USER if title else "",
            model_config={"external_id": key, "external_last": last, "external_tree": digest},
            started_at=started,
            last_activity_at=started,
            message_count=len(conv.messages) + len(conv.branches),
        )
        messages, newest = self._messages(session, conv.messages, started)
        for start in range(0, len(messages), _BATCH):
            Message.objects.bulk_create(messages[start : start + _BATCH])
        path_link_new_session(session_id=session.pk)
        Session.objects.filter(pk=session.pk).update(
            last_activity_at=max(newest, started),
            model_config={**session.model_config, "external_tip": messages[-1].pk},
        )
        self._branches(
            session, conv, {m.ext_id: s for m, s in zip(conv.messages, messages, strict=True)}
        )
        self.known[key] = (session.pk, digest)
        self.report.session_ids.append(session.pk)
        self.report.sessions_created += 1
        self.report.messages_created += len(messages)

    def _branches(self, session: Any, conv: Imported, stored: dict[str, Any]) -> None:
        """Other branches as the conversation's alternatives: off the selected path
        (`active` false), each message after its parent (sessions_app.branches)."""
        for item in conv.branches:
            parent = stored.get(item.parent)
            (message,), _ = self._messages(
                session, [item], parent.timestamp if parent else session.started_at
            )
            message.parent, message.active = parent, False
            message.save()
            stored[item.ext_id] = message
        if conv.branches:
            self.report.branch_messages += len(conv.branches)

    def _update(self, key: str, conv: Imported) -> None:
        """A conversation imported before: merge what changed in it (chat_merge)."""
        from sessions_app.models import Session

        session_id, digest = self.known[key]
        self.report.session_ids.append(session_id)
        new_digest = tree_digest(conv)
        if new_digest == digest or not conv.messages:
            self.report.sessions_skipped += 1
            return
        session = Session.objects.filter(pk=session_id, owner=self.user).first()
        if session is None:
            self.report.sessions_skipped += 1
            return
        merged = conversation_merge(
            session=session,
            conv=conv,
            config={
                "external_last": stored_id(conv.messages[-1].ext_id),
                "external_tree": new_digest,
            },
            cap=self._cut,
            count_cut=self._capped,
        )
        self.report.sessions_skipped += 1
        if merged.note:
            self._warn(merged.note)
            return
        self.known[key] = (session_id, new_digest)
        self.report.messages_appended += merged.on_path
        self.report.branch_messages += merged.aside
        self.report.paths_followed += int(merged.followed)


def chat_import(
    *, user: AbstractBaseUser, path: Path, progress: Progress | None = None
) -> HermesImportReport:
    """Import the ChatGPT or Claude export at `path` (see the module docstring). Raises
    ServiceError, having imported nothing, when the file is not a sound export.
    `progress(done, total)` is called after each conversation."""
    path = Path(path)
    if not path.is_file():
        raise ServiceError(
            "not_found", lazy_format(gettext_lazy("%(path)s is not a file."), path=str(path))
        )
    total = sum(1 for _ in parsed(path))  # the checking pass
    importer = _Importer(user)
    for done, conv in enumerate(parsed(path), start=1):
        importer.add(conv)
        if progress is not None:
            progress(done, total)
    return importer.finish()
