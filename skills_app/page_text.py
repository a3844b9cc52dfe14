"""What the Skills pages say when a service refuses, in the reader's language.

The skill services speak English: their refusals are also what the agent reads (the tool
result stays English). A page in English shows them word for word (they name the exact
field or line); a page in another language says the same thing again here, translated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext, gettext_lazy

from accounts.language import reads_english
from core.exceptions import ServiceError

from . import skillmd

#: Fixed refusals of skillmd and the services, word for word.
EXACT = {
    "SKILL.md is empty; it needs YAML frontmatter and a body.": gettext_lazy(
        "SKILL.md is empty; it needs YAML frontmatter and a body."
    ),
    "SKILL.md must start with YAML frontmatter: a line '---', then 'name:' and "
    "'description:' lines, then a closing '---' line.": gettext_lazy(
        "SKILL.md must start with YAML frontmatter: a line “---”, then “name:” and "
        "“description:” lines, then a closing “---” line."
    ),
    "The frontmatter is not closed: add a line '---' after it.": gettext_lazy(
        "The frontmatter is not closed: add a line “---” after it."
    ),
    "The frontmatter must be a YAML mapping with 'name' and 'description'.": gettext_lazy(
        "The frontmatter must be a YAML mapping with “name” and “description”."
    ),
    "The frontmatter has no 'name'.": gettext_lazy("The frontmatter has no “name”."),
    "The frontmatter has no 'description' (one line saying when to use it).": gettext_lazy(
        "The frontmatter has no “description” (one line saying when to use it)."
    ),
    "The SKILL.md body is empty: write the instructions below the frontmatter.": gettext_lazy(
        "The SKILL.md body is empty: write the instructions below the frontmatter."
    ),
    "Frontmatter 'tags' must be a list or a comma-separated string.": gettext_lazy(
        "The frontmatter’s “tags” must be a list or a comma-separated string."
    ),
    "SKILL.md is not UTF-8 text.": gettext_lazy("SKILL.md is not UTF-8 text."),
    "That file is not a zip archive.": gettext_lazy("That file is not a zip archive."),
    "No skills found: expected skills/[category/]name/SKILL.md entries.": gettext_lazy(
        "No skills found: expected skills/[category/]name/SKILL.md entries."
    ),
}


def page_message(exc: ServiceError) -> str:
    """The refusal as the reader reads it."""
    if reads_english():
        return exc.message
    if exc.message in EXACT:
        return str(EXACT[exc.message])
    code = exc.code
    if code == "blocked":
        return gettext(
            "Not saved: the safety scan blocked this text (%(findings)s). It reads like "
            "instructions planted for the agent or an attempt to send data elsewhere. Nothing "
            "was changed; the previous version stays."
        ) % {"findings": ", ".join(exc.details.get("findings") or [])}
    if code == "invalid_name":
        return gettext(
            "The skill name or category is missing or invalid: use at most %(max)d lowercase "
            "letters, digits, “.”, “_” and “-”, starting with a letter or digit (e.g. "
            "k8s-storage)."
        ) % {"max": skillmd.NAME_MAX}
    if code == "invalid_path":
        return gettext(
            "Invalid file path: files go under references/, templates/, scripts/ or assets/ "
            "(e.g. references/api.md), with plain file and folder names, “/” between them and "
            "no “..”."
        )
    if code == "too_large":
        return gettext(
            "Too large: SKILL.md holds at most %(content)s characters and each file at most "
            "1 MiB; move long material into references/ files."
        ) % {"content": f"{skillmd.CONTENT_MAX:,}"}
    if code == "invalid_skill":
        return gettext(
            "SKILL.md is not valid: it needs YAML frontmatter between two “---” lines with "
            "the skill’s name (the same as before, when editing) and a description of at most "
            "%(max)s characters, then the instructions."
        ) % {"max": f"{skillmd.DESCRIPTION_MAX:,}"}
    if code == "invalid_zip":
        return gettext("The zip is damaged and could not be read.")
    if code == "exists":
        return gettext("A skill with this name already exists; choose another name.")
    if code == "protected":
        return gettext("This skill is pinned; unpin it first.")
    if code == "not_found":
        return gettext("That skill, file or revision no longer exists.")
    if code == "not_restorable":
        return gettext("That revision is of a binary file; its bytes are not kept in history.")
    return exc.message


def reworded(view: Callable[..., Any]) -> Callable[..., Any]:
    """A view whose refusals (flashed by ServiceErrorMiddleware) read in the reader's
    language; a 404 stays a 404."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except ServiceError as exc:
            if exc.status_code == 404 or reads_english():
                raise
            shown = page_message(exc)
            raise ServiceError(exc.code, shown, status=exc.status_code, **exc.details) from None

    return wrapper
