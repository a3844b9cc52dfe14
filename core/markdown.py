"""Safe Markdown rendering for text written by people or by the model (chat answers,
summaries, skills).

Raw HTML in the source is shown as text (markdown-it with html off), the result is cleaned
again by nh3 against an allow-list, links are limited to http/https/mailto and open in a
new tab without a referrer. Images from other sites are never loaded: they become links,
so a reply cannot exfiltrate data through an image URL; same-site images are shown.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
    "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th",
    "td", "img",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}
URL_SCHEMES = {"http", "https", "mailto"}


def is_same_site(url: str) -> bool:
    parts = urlsplit(url)
    return not (parts.scheme or parts.netloc or url.startswith("//"))


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    if is_same_site(src):
        return f'<img src="{escape(src)}" alt="{escape(alt)}">'
    return f'<a href="{escape(src)}">[image: {escape(alt)}]</a>'


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src" and not is_same_site(value):
        return None
    if tag == "code" and attribute == "class" and not value.startswith("language-"):
        return None
    return value


_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_md.add_render_rule("image", _image)


def render_markdown(text: str) -> SafeString:
    html = _md.render(text or "")
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_attribute_filter,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
    return mark_safe(clean)  # noqa: S308 — cleaned by nh3 against the allow-list above
