"""The SKILL.md format: parsing, validation, limits, and safe rendering to HTML.

Facts follow Hermes: YAML frontmatter between `---` lines (a BOM is allowed) that must be a
mapping with a `name` and a `description` (≤1024 chars), then a non-empty Markdown body.
Names and categories match `^[a-z0-9][a-z0-9._-]*$` and are at most 64 characters. A SKILL.md
is at most 100,000 characters, a supporting file at most 1 MiB, and files live only under
`references/`, `templates/`, `scripts/` or `assets/`.

Every failure is a ServiceError with code `invalid_skill` (or `invalid_name`, `invalid_path`,
`too_large`) and a message that says what to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from core.exceptions import ServiceError

NAME_MAX = 64
DESCRIPTION_MAX = 1024
CONTENT_MAX = 100_000
FILE_MAX_BYTES = 1024 * 1024
FILE_PATH_MAX = 255
FILE_DIRS: tuple[str, ...] = ("references", "templates", "scripts", "assets")

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# The opening fence, optionally after a BOM; the closing fence is "\n---", optional spaces,
# then a newline (or the end of the text, which then leaves an empty body).
_OPEN_RE = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_CLOSE_RE = re.compile(r"\r?\n---[ \t]*(?:\r?\n|\Z)")
_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._ -]*$")

TEMPLATE = """---
name: {name}
description: One line saying when to use this skill.
---

# {title}

## When to use
- …

## Steps
1. …

## Pitfalls
- …
"""


@dataclass(frozen=True)
class ParsedSkill:
    name: str
    description: str
    body: str
    frontmatter: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. Under YAML 1.1 a skill named `off`, `no` or `on`
    would come back as a boolean."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _raw_scalar(raw_yaml: str, key: str) -> str | None:
    """The literal text of a top-level scalar (`name: 010` is the name '010', not 8)."""
    node = yaml.compose(raw_yaml, Loader=_Loader)
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == key and isinstance(value_node, yaml.ScalarNode):
            return value_node.value
    return None


def invalid(message: str, code: str = "invalid_skill", **details: Any) -> ServiceError:
    return ServiceError(code, message, **details)


def check_name(name: Any, *, what: str = "name") -> str:
    """Return `name` if it is a valid skill name (or category), else raise."""
    if not isinstance(name, str) or not name:
        raise invalid(f"The skill {what} is required.", "invalid_name")
    if len(name) > NAME_MAX:
        raise invalid(
            f"The skill {what} is {len(name)} characters long; the limit is {NAME_MAX}.",
            "invalid_name",
        )
    if not _NAME_RE.match(name):
        raise invalid(
            f"Invalid skill {what} {name!r}: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (e.g. 'k8s-storage').",
            "invalid_name",
        )
    return name


def check_category(category: Any) -> str:
    """A category is optional ('' means none) and is a single directory segment."""
    if category in (None, ""):
        return ""
    return check_name(category, what="category")


def check_file_path(path: Any) -> str:
    """Return a normalised supporting-file path, or raise.

    Allowed: `<dir>/<file>` (or deeper) with <dir> one of the four folders; no `..`, no
    absolute paths, no backslashes, no hidden or empty segments.
    """
    if not isinstance(path, str) or not path.strip():
        raise invalid("A file path is required, e.g. 'references/api.md'.", "invalid_path")
    path = path.strip()
    if "\\" in path or "\x00" in path:
        raise invalid(f"Invalid file path {path!r}: use '/' as the separator.", "invalid_path")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise invalid(f"Invalid file path {path!r}: it must be relative.", "invalid_path")
    parts = path.split("/")
    if any(part == ".." for part in parts):
        raise invalid(f"Invalid file path {path!r}: '..' is not allowed.", "invalid_path")
    if len(path) > FILE_PATH_MAX:
        raise invalid(
            f"The file path is {len(path)} characters long; the limit is {FILE_PATH_MAX}.",
            "invalid_path",
        )
    if parts[0] not in FILE_DIRS or len(parts) < 2:
        raise invalid(
            f"Invalid file path {path!r}: files go under "
            + ", ".join(f"{d}/" for d in FILE_DIRS)
            + " (e.g. 'references/api.md').",
            "invalid_path",
        )
    for part in parts[1:]:
        if not part or part in (".",) or not _SEGMENT_RE.match(part):
            raise invalid(
                f"Invalid file path {path!r}: each part must be a plain file or folder name "
                "(letters, digits, '.', '_', '-', spaces; not starting with '.').",
                "invalid_path",
            )
    return path


def check_file_size(size: int, *, path: str) -> None:
    if size > FILE_MAX_BYTES:
        raise invalid(
            f"The file {path} is {size:,} bytes; the limit is {FILE_MAX_BYTES:,} bytes (1 MiB).",
            "too_large",
        )


def _tags(raw: Any) -> list[str]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        items: list[Any] = text.split(",")
    elif isinstance(raw, list):
        items = raw
    else:
        raise invalid("Frontmatter 'tags' must be a list or a comma-separated string.")
    return [str(item).strip().strip("'\"") for item in items if str(item).strip()]


def parse(content: Any) -> ParsedSkill:
    """Parse and validate a whole SKILL.md. Raises ServiceError saying what is wrong."""
    if not isinstance(content, str) or not content.strip():
        raise invalid("SKILL.md is empty; it needs YAML frontmatter and a body.")
    if len(content) > CONTENT_MAX:
        raise invalid(
            f"SKILL.md is {len(content):,} characters; the limit is {CONTENT_MAX:,}. "
            "Move long material into references/ files.",
            "too_large",
        )
    opening = _OPEN_RE.match(content)
    if opening is None:
        raise invalid(
            "SKILL.md must start with YAML frontmatter: a line '---', then 'name:' and "
            "'description:' lines, then a closing '---' line."
        )
    closing = _CLOSE_RE.search(content, opening.end() - 1)
    if closing is None:
        raise invalid("The frontmatter is not closed: add a line '---' after it.")
    raw_yaml = content[opening.end() : closing.start()]
    body = content[closing.end() :]
    try:
        meta = yaml.load(raw_yaml, Loader=_Loader) if raw_yaml.strip() else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise invalid(f"The frontmatter is not valid YAML{where}: {exc}".split("\n")[0]) from None
    if not isinstance(meta, dict):
        raise invalid("The frontmatter must be a YAML mapping with 'name' and 'description'.")
    name = meta.get("name")
    if name is None or name == "":
        raise invalid("The frontmatter has no 'name'.")
    if not isinstance(name, str):
        name = _raw_scalar(raw_yaml, "name")
    check_name(name)
    meta["name"] = name
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise invalid("The frontmatter has no 'description' (one line saying when to use it).")
    description = description.strip()
    if len(description) > DESCRIPTION_MAX:
        raise invalid(
            f"The description is {len(description):,} characters; the limit is {DESCRIPTION_MAX:,}."
        )
    if not body.strip():
        raise invalid("The SKILL.md body is empty: write the instructions below the frontmatter.")
    # YAML dates and the like must survive a round trip through JSONField.
    frontmatter = {str(k): _jsonable(v) for k, v in meta.items()}
    return ParsedSkill(
        name=name,
        description=description,
        body=body.strip("\n"),
        frontmatter=frontmatter,
        tags=_tags(meta.get("tags")),
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
