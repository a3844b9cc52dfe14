"""Live Markdown in Chromium (static/js/markdown.js): an answer is rendered while it streams,
by the same rules as the server's renderer, so nothing moves when the server's HTML replaces
it; code is highlighted and copyable, every message has a Copy button, and hostile model
output stays text.

The scripted model pauses mid-answer (a stall fault after N streamed events), which is when
the page is looked at "while still streaming"."""

from __future__ import annotations

import re
from typing import Any

import pytest

from core.markdown import render_markdown
from devtools.scripted_llm import Fault
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, logged_in_page

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VIEWPORTS = {"desktop": (1366, 900), "phone": (390, 844)}
PAUSE = 4.0  # seconds the model stalls mid-answer: time to look at the streaming bubble
# The server publishes held-back text when the next piece arrives a coalescing window
# (50 ms by default) after the last event, so pieces slower than that are each on screen
# at once, including the last one before the stall.
PIECE_DELAY = 0.12

# Everything the page shows of a rendered element, as a person would compare two versions
# of it: the tree of tags and attributes (text left out), the text as laid out, the height.
# The streaming bubble's last look is recorded at each change, in the page, because the
# server's HTML replaces it within the same task as the turn ends.
WATCH_JS = """
() => {
  window.__look = (root) => {
    const shape = (node) => [node.tagName.toLowerCase(),
      Array.from(node.attributes).map(a => a.name + "=" + a.value).sort(),
      Array.from(node.children).map(shape)];
    return {shape: Array.from(root.children).map(shape), text: root.innerText,
            height: root.getBoundingClientRect().height};
  };
  window.__lastStreamed = null;
  new MutationObserver(() => {
    const body = document.querySelector(".msg-streaming .msg-body");
    if (body) window.__lastStreamed = window.__look(body);
  }).observe(document.getElementById("thread"), {childList: true, subtree: true});
}
"""
# Any element the model's text could have made dangerous, anywhere in the page.
DANGER_JS = """
() => ({
  flag: window.__xss === undefined ? null : String(window.__xss),
  handlers: Array.from(document.querySelectorAll("*")).filter(
    el => Array.from(el.attributes).some(a => a.name.toLowerCase().startsWith("on"))).length,
  scriptLinks: Array.from(document.querySelectorAll("[href], [src]")).filter(
    el => /^\\s*(javascript|vbscript|data):/i.test(
      el.getAttribute("href") || el.getAttribute("src"))).length,
  threadScripts: document.querySelectorAll("#thread script, #thread iframe, #thread img").length,
})
"""


def pieces(text: str) -> int:
    """How many content events the scripted model streams for `text` (its piece split)."""
    return len(re.findall(r"\s*\S+\s*|\s+", text))


def pause_after(prefix: str) -> Fault:
    """Stall the stream once `prefix` has been sent (event 0 is the role chunk)."""
    return Fault(stall_after=1 + pieces(prefix), stall_seconds=PAUSE, times=1)


def open_chat(browser: Any, live_server_url: str, user: Any, size: str) -> tuple[Any, Any, list]:
    width, height = VIEWPORTS[size]
    page, errors = logged_in_page(
        browser,
        live_server_url,
        user,
        {"width": width, "height": height},
        permissions=["clipboard-read", "clipboard-write"],
    )
    page.goto(f"{live_server_url}/chat/")
    return page.context, page, errors


def send(page: Any, text: str) -> None:
    page.fill("#composer-text", text)
    page.keyboard.press("Enter")


def inside_viewport(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return (
        box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]
    )


PREFIX = (
    "**Bold move** first.\n\n> A wise quote\n\n- alpha\n- beta\n\n"
    "```python\ndef greet(name):\n    return 'hi ' + name\n"
)
CODE = "def greet(name):\n    return 'hi ' + name\n"
ANSWER = PREFIX + "```\n\nAll *done*, see [the docs](https://example.org/docs).\n"


@pytest.mark.parametrize("size", VIEWPORTS)
def test_markdown_renders_while_streaming_and_the_swap_changes_nothing(
    owner, live_server_url, llm_for_server, browser, size
):
    llm_for_server.chunk_delay = PIECE_DELAY
    llm_for_server.add_rule("Show me markdown", reply=ANSWER, fault=pause_after(PREFIX), times=1)
    context, page, errors = open_chat(browser, live_server_url, owner, size)
    page.evaluate(WATCH_JS)
    send(page, "Show me markdown")

    # Mid-answer: the model is paused inside an unterminated code fence.
    streaming = ".msg-streaming .msg-body"
    wait_for(
        lambda: (
            [t.rstrip("\n") for t in page.locator(f"{streaming} pre code").all_inner_texts()]
            == [CODE.rstrip("\n")]
        ),
        timeout=20,
        what="the answer to stream up to the pause",
    )
    assert page.locator(f"{streaming} strong").inner_text() == "Bold move"
    assert page.locator(f"{streaming} blockquote").inner_text() == "A wise quote"
    assert page.locator(f"{streaming} li").all_inner_texts() == ["alpha", "beta"]
    assert "**" not in page.inner_text(streaming) and "```" not in page.inner_text(streaming)
    assert page.locator(f"{streaming} pre code.hljs .hljs-keyword").first.inner_text() == "def"
    assert page.locator(f"{streaming} .code-bar").inner_text().startswith("python")
    assert page.locator(f"{streaming} .code-bar button").is_visible()
    assert inside_viewport(page, f"{streaming} .code-block")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"markdown-streaming-{size}.png"))

    page.wait_for_selector(".msg-streaming", state="detached", timeout=20000)
    page.wait_for_selector("#stop", state="hidden", timeout=5000)
    final = ".msg-assistant .msg-body"
    # The server's HTML shows exactly what the browser had rendered of the whole answer.
    streamed = page.evaluate("() => window.__lastStreamed")
    assert streamed["text"].endswith("All done, see the docs.")
    assert page.evaluate(f"() => window.__look(document.querySelector('{final}'))") == streamed
    link = page.locator(f"{final} a")
    assert link.get_attribute("href") == "https://example.org/docs"
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"

    # Copy a code block, then a whole answer (its Markdown) and a person's message.
    page.click(f"{final} .code-bar button")
    page.wait_for_selector(f"{final} .code-bar button >> text=Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == CODE
    page.click(".msg-assistant .msg-who button")
    page.wait_for_selector(".msg-assistant .msg-who button >> text=Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == ANSWER
    page.click(".msg-user .msg-who button")
    page.wait_for_selector(".msg-user .msg-who button >> text=Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == "Show me markdown"
    assert page.locator(".msg-who button").count() == 2
    assert all(inside_viewport(page, f".msg-who button >> nth={i}") for i in range(2))
    page.screenshot(path=str(SCREENSHOTS / f"markdown-done-{size}.png"))
    assert errors == []
    context.close()


HOSTILE_PREFIX = (
    "<script>window.__xss = 1</script>\n\n"
    '[click me](javascript:window.__xss=2) and <a href="javascript:window.__xss=3">raw</a>\n\n'
    '<img src=x onerror="window.__xss=4">\n\n'
    "![pixel](https://evil.example/track.png?q=secret)\n\n"
    "&lt;b&gt;not bold&lt;/b&gt; &amp; &copy;\n\n"
    '```html\n<img src=x onerror="window.__xss=5">\n'
)
HOSTILE = HOSTILE_PREFIX + "<script>window.__xss=6</script>\n"  # the fence is never closed


@pytest.mark.parametrize("size", VIEWPORTS)
def test_hostile_model_output_stays_text_while_streaming_and_after(
    owner, live_server_url, llm_for_server, browser, size
):
    llm_for_server.chunk_delay = PIECE_DELAY
    llm_for_server.add_rule("Be hostile", reply=HOSTILE, fault=pause_after(HOSTILE_PREFIX), times=1)
    context, page, errors = open_chat(browser, live_server_url, owner, size)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.evaluate(WATCH_JS)
    send(page, "Be hostile")

    for body in (".msg-streaming .msg-body", ".msg-assistant:not(.msg-streaming) .msg-body"):
        if "not" in body:
            page.wait_for_selector(".msg-streaming", state="detached", timeout=20000)
        else:
            # Mid-answer, inside the unterminated fence: it already shows as code.
            page.wait_for_selector(f"{body} pre code >> text=onerror", timeout=20000)
        assert page.evaluate(DANGER_JS) == {
            "flag": None,
            "handlers": 0,
            "scriptLinks": 0,
            "threadScripts": 0,
        }
        shown = page.inner_text(body)
        assert "<script>window.__xss = 1</script>" in shown
        assert "[click me](javascript:window.__xss=2)" in shown
        assert '<a href="javascript:window.__xss=3">raw</a>' in shown
        assert '<img src=x onerror="window.__xss=4">' in shown
        assert "[image: pixel]" in shown
        assert "<b>not bold</b> & ©" in shown
        assert page.locator(f"{body} b").count() == 0
        code = page.locator(f"{body} pre code").inner_text()
        assert code.startswith('<img src=x onerror="window.__xss=5">')

    assert "window.__xss=6" in code, "the unterminated fence runs to the end once done"
    assert page.evaluate(f"() => window.__look(document.querySelector('{body}'))") == (
        page.evaluate("() => window.__lastStreamed")
    ), "the server's HTML looks like the streamed answer"
    assert not [url for url in requested if "evil.example" in url]
    page.screenshot(path=str(SCREENSHOTS / f"markdown-hostile-{size}.png"))
    assert errors == []
    context.close()


PARITY_JS = """
([text, serverHtml]) => {
  function shape(node) {
    return [node.tagName.toLowerCase(),
            Array.from(node.attributes).map(a => a.name + "=" + a.value).sort(),
            Array.from(node.children).map(shape)];
  }
  function look(fill) {
    const box = document.createElement("div");
    box.className = "md";
    fill(box);
    document.body.appendChild(box);
    const seen = {shape: Array.from(box.children).map(shape), text: box.innerText};
    box.remove();
    return seen;
  }
  const template = document.createElement("template");
  template.innerHTML = serverHtml;
  return [look(b => b.appendChild(HermesMarkdown.render(text))),
          look(b => b.appendChild(template.content))];
}
"""
CORPUS = [
    "# Title\n## Sub\n###### Six",
    "Some *em*, **strong**, ~~gone~~, `code` and a\nsoft break, a hard  \nbreak.",
    "1. one\n2. two\n\n---\n\n3) three\n4) four\n\n7. seven\n8. eight",
    "- tight\n- list\n  - nested\n\n* loose\n\n* list",
    "> quote\n> - with list\n>\n> > nested",
    "| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |",
    '[abs](https://x.org "t") [rel](/memory/) [mail](mailto:a@b.c) [ftp](ftp://x.org) '
    "<https://auto.link> [js](javascript:alert(1)) [data](data:text/html,x)",
    "![local](/static/favicon.svg) ![remote](https://evil.example/a.png) ![](//evil.example/b)",
    "```\nplain fence\n```\n\n    indented code\n\n```py extra words\nx = 1\n```",
    "&lt;b&gt; &amp; &copy; &#x3C;i&#x3E; \\*not em\\*",
    "<b>raw</b> <script>alert(1)</script>\n\n<div onclick=x>block</div>",
    "```js\nunterminated",
]


def test_the_browser_renders_markdown_as_the_server_does(owner, live_server_url, browser):
    context, page, errors = open_chat(browser, live_server_url, owner, "desktop")
    for text in CORPUS:
        client, server = page.evaluate(PARITY_JS, [text, str(render_markdown(text))])
        assert client == server, text
    assert errors == []
    context.close()
