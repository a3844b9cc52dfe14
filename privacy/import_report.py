"""What an import of a Hermes home did, as shown on the Account page and by
`manage.py import_hermes`."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.formats import number_format
from django.utils.translation import gettext


@dataclass
class HermesImportReport:
    sessions_created: int = 0
    sessions_skipped: int = 0
    messages_created: int = 0
    #: target → what the memory import said ("Imported 3 new entries.").
    memory: dict[str, str] = field(default_factory=dict)
    #: Entries the threat scanner refused, one line each.
    blocked: list[str] = field(default_factory=list)
    identity: str = ""
    skills_created: int = 0
    skills_updated: int = 0
    skills_unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: What was cut to its cap → how many times ("message texts cut to …": 2).
    shortened: dict[str, int] = field(default_factory=dict)
    #: What was left out (or replaced by a placeholder) and why → how many times.
    skipped: dict[str, int] = field(default_factory=dict)
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

    def cut(self, what: str) -> None:
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
            or any(not m.startswith("Imported 0 ") for m in self.memory.values())
        )

    def lines(self) -> list[str]:
        """The report in the active language (the person's, on the Account page)."""
        out = [
            gettext(
                "Conversations: %(created)s imported, %(skipped)s already there "
                "(%(messages)s messages)."
            )
            % {
                "created": self.sessions_created,
                "skipped": self.sessions_skipped,
                "messages": self.messages_created,
            },
        ]
        if self.branch_messages:
            out.append(
                gettext(
                    "%(count)s message(s) on other branches (edits, regenerations) imported as "
                    "alternatives."
                )
                % {"count": self.branch_messages}
            )
        if self.messages_appended:
            out.append(
                gettext("%(count)s new message(s) added to conversations imported before.")
                % {"count": self.messages_appended}
            )
        if self.paths_followed:
            out.append(
                gettext(
                    "%(count)s conversation(s) imported before now show the branch last viewed "
                    "in the newer export (the earlier one stays as an alternative)."
                )
                % {"count": self.paths_followed}
            )
        for target, message in self.memory.items():
            out.append(f"{'MEMORY.md' if target == 'memory' else 'USER.md'}: {message}")
        out += [blocked_prefix() + b for b in self.blocked]
        if self.identity:
            out.append(self.identity)
        if self.skills_created or self.skills_updated or self.skills_unchanged:
            out.append(
                gettext(
                    "Skills: %(created)s created, %(updated)s updated, %(unchanged)s unchanged."
                )
                % {
                    "created": self.skills_created,
                    "updated": self.skills_updated,
                    "unchanged": self.skills_unchanged,
                }
            )
        out += [
            gettext("Shortened: %(count)s %(what)s.")
            % {"count": number_format(n, force_grouping=True), "what": what}
            for what, n in self.shortened.items()
        ]
        out += [
            gettext("Skipped: %(count)s %(what)s.")
            % {"count": number_format(n, force_grouping=True), "what": what}
            for what, n in self.skipped.items()
        ]
        out += [gettext("Note: %(note)s") % {"note": w} for w in self.warnings]
        out += [error_prefix() + e for e in self.errors]
        return out


def error_prefix() -> str:
    """How a report line of an error starts, in the active language ("Error: ")."""
    return gettext("Error: ")


def blocked_prefix() -> str:
    """How a report line of a blocked memory entry starts ("Blocked: ")."""
    return gettext("Blocked: ")
