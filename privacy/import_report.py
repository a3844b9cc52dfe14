"""What an import did, as shown on the Account page and by `manage.py import_hermes` /
`import_chats`. Everything it says is marked for translation (core.exceptions.Text), so the
summary a background import keeps (`stored`) reads in the language of whoever opens the page
later, not of the worker that wrote it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext_lazy

from core.exceptions import Stored, Text, lazy_format, stored


@dataclass
class HermesImportReport:
    sessions_created: int = 0
    sessions_skipped: int = 0
    messages_created: int = 0
    #: target → what the memory import did, a line naming its file ("MEMORY.md: Imported 3
    #: new entries.").
    memory: dict[str, Text] = field(default_factory=dict)
    #: Whether the memory import added (or removed) any entry.
    memory_changed: bool = False
    #: Entries the threat scanner refused, one line each.
    blocked: list[Text] = field(default_factory=list)
    identity: Text = ""
    skills_created: int = 0
    skills_updated: int = 0
    skills_unchanged: int = 0
    warnings: list[Text] = field(default_factory=list)
    errors: list[Text] = field(default_factory=list)
    #: What was cut to its cap → how many times ("message texts cut to …": 2).
    shortened: dict[Text, int] = field(default_factory=dict)
    #: What was left out (or replaced by a placeholder) and why → how many times; each kind
    #: a `lazy_format` message (equal across languages, so it counts).
    skipped: dict[Text, int] = field(default_factory=dict)
    #: Messages added to conversations an earlier import brought in (a newer export).
    messages_appended: int = 0
    #: Messages on other branches of a conversation, imported as its alternatives.
    branch_messages: int = 0
    #: Conversations imported before whose selected path moved to the newer export's branch.
    paths_followed: int = 0
    #: ChatGPT/Claude: our conversation of each of the export's, in its order (imported now
    #: or before), for the learning review.
    session_ids: list[str] = field(default_factory=list)
    #: ChatGPT/Claude: the export's format ("chatgpt" or "claude").
    chat_source: str = ""

    def cut(self, what: Text) -> None:
        self.shortened[what] = self.shortened.get(what, 0) + 1

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def added_anything(self) -> bool:
        return bool(
            self.sessions_created
            or self.messages_created
            or self.messages_appended
            or self.branch_messages
            or self.paths_followed
            or self.skills_created
            or self.skills_updated
            or self.memory_changed
        )

    def lines(self) -> list[str]:
        """The report in the active language (the person's, on the Account page)."""
        return [str(line) for line, _problem in self.said()]

    def stored(self) -> list[Stored]:
        """The report's lines to keep (a job's summary), each shown later in the reader's
        language (core.exceptions.restored)."""
        return [stored(line) for line, _problem in self.said()]

    def said(self) -> list[tuple[Text, bool]]:
        """The report's lines, translated when shown, each with whether it tells of a
        problem (an error, a blocked memory entry)."""
        lines: list[Text] = [
            lazy_format(
                gettext_lazy(
                    "Conversations: %(created)s imported, %(skipped)s already there "
                    "(%(messages)s messages)."
                ),
                created=self.sessions_created,
                skipped=self.sessions_skipped,
                messages=self.messages_created,
            ),
        ]
        if self.branch_messages:
            lines.append(
                lazy_format(
                    gettext_lazy(
                        "%(count)s message(s) on other branches (edits, regenerations) imported "
                        "as alternatives."
                    ),
                    count=self.branch_messages,
                )
            )
        if self.messages_appended:
            lines.append(
                lazy_format(
                    gettext_lazy(
                        "%(count)s new message(s) added to conversations imported before."
                    ),
                    count=self.messages_appended,
                )
            )
        if self.paths_followed:
            lines.append(
                lazy_format(
                    gettext_lazy(
                        "%(count)s conversation(s) imported before now show the branch last "
                        "viewed in the newer export (the earlier one stays as an alternative)."
                    ),
                    count=self.paths_followed,
                )
            )
        lines += self.memory.values()
        said = [(line, False) for line in lines]
        said += [
            (lazy_format(gettext_lazy("Blocked: %(line)s"), line=line), True)
            for line in self.blocked
        ]
        lines = [self.identity] if self.identity else []
        if self.skills_created or self.skills_updated or self.skills_unchanged:
            lines.append(
                lazy_format(
                    gettext_lazy(
                        "Skills: %(created)s created, %(updated)s updated, %(unchanged)s unchanged."
                    ),
                    created=self.skills_created,
                    updated=self.skills_updated,
                    unchanged=self.skills_unchanged,
                )
            )
        lines += [
            lazy_format(gettext_lazy("Shortened: %(count)s %(what)s."), count=f"{n:,}", what=what)
            for what, n in self.shortened.items()
        ]
        lines += [
            lazy_format(gettext_lazy("Skipped: %(count)s %(what)s."), count=f"{n:,}", what=what)
            for what, n in self.skipped.items()
        ]
        lines += [lazy_format(gettext_lazy("Note: %(note)s"), note=w) for w in self.warnings]
        said += [(line, False) for line in lines]
        said += [
            (lazy_format(gettext_lazy("Error: %(line)s"), line=line), True) for line in self.errors
        ]
        return said
