// Live Markdown for the chat. A streaming answer is rendered as it arrives, and every
// rendered message (streamed, or HTML from the server) gets code highlighting, a Copy
// button per code block and a Copy button per message.
//
// Safe without sanitising HTML, because no HTML from the model is ever parsed: markdown-it
// turns the text into tokens (with html off, raw HTML stays text) and the DOM is built from
// the tokens with createElement and textContent, keeping only what the server's renderer
// (core/markdown.py: markdown-it-py, of which markdown-it is the original, then nh3) keeps:
//
//   core/markdown.py                          here
//   MarkdownIt("commonmark", html off, …)     md: the same preset, options and rules
//   ALLOWED_TAGS (others: tag dropped,        ALLOWED_TAGS (others: tag dropped,
//     content kept)                             content kept)
//   ALLOWED_ATTRIBUTES                        ALLOWED_ATTRIBUTES
//   _attribute_filter                         allowedValue (img src same-site only,
//                                               code class language-* only)
//   url_schemes http/https/mailto             allowedValue for a href (relative passes,
//                                               as in nh3)
//   _image: remote image -> "[image: alt]"    image()
//   link_rel, target=_blank                   LINK_REL, target
//
// Because both sides apply the same rules, the server's HTML that replaces the streamed
// answer when the turn ends (chat.js refreshThread) shows exactly what was already on the
// screen, and the decoration below runs on it before the next paint (MutationObserver), so
// the swap changes nothing visible. The server stays the authority for stored answers.
(function () {
  "use strict";

  const md = window.markdownit("commonmark", { html: false, linkify: false, breaks: true })
    .enable(["table", "strikethrough"]);

  const ALLOWED_TAGS = new Set([
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
    "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th",
    "td", "img",
  ]);
  const ALLOWED_ATTRIBUTES = {
    a: ["href", "title"],
    img: ["src", "alt", "title"],
    code: ["class"],
    ol: ["start"],
    th: ["align"],
    td: ["align"],
  };
  const URL_SCHEMES = new Set(["http", "https", "mailto"]);
  const LINK_REL = "noopener noreferrer nofollow";
  const SCHEME = /^([a-z][a-z0-9+.-]*):/i;
  // Deltas arrive about ten times a second; a faster stream is re-rendered at most this often.
  const RENDER_EVERY_MS = 50;

  // As core.markdown.is_same_site: no scheme and no host.
  function isSameSite(url) {
    return !SCHEME.test(url) && !url.startsWith("//");
  }

  function allowedValue(tag, name, value) {
    if (tag === "img" && name === "src") return isSameSite(value) ? value : null;
    if (tag === "code" && name === "class") return value.startsWith("language-") ? value : null;
    if (tag === "a" && name === "href") {
      const scheme = SCHEME.exec(value);
      return !scheme || URL_SCHEMES.has(scheme[1].toLowerCase()) ? value : null;
    }
    return value;
  }

  function element(tag, attrs) {
    if (!ALLOWED_TAGS.has(tag)) return null;
    const node = document.createElement(tag);
    const allowed = ALLOWED_ATTRIBUTES[tag] || [];
    (attrs || []).forEach(function (pair) {
      if (allowed.indexOf(pair[0]) < 0) return;
      const value = allowedValue(tag, pair[0], String(pair[1]));
      if (value !== null) node.setAttribute(pair[0], value);
    });
    if (tag === "a") {
      node.target = "_blank";
      node.rel = LINK_REL;
    }
    return node;
  }

  function withText(node, text) {
    node.textContent = text;
    return node;
  }

  function image(token) {
    const src = token.attrGet("src") || "";
    const alt = md.renderer.renderInlineAsText(token.children || [], md.options, {}) || "image";
    if (isSameSite(src)) return element("img", [["src", src], ["alt", alt]]);
    return withText(element("a", [["href", src]]), "[image: " + alt + "]");
  }

  function codeBlock(token) {
    const info = token.type === "fence" ? md.utils.unescapeAll(token.info).trim() : "";
    const lang = info ? info.split(/\s+/)[0] : "";
    const pre = element("pre");
    pre.appendChild(withText(element("code", lang ? [["class", "language-" + lang]] : []), token.content));
    return pre;
  }

  function leaf(token, parent) {
    switch (token.type) {
      case "inline": build(token.children || [], parent); break;
      case "softbreak": case "hardbreak": parent.appendChild(element("br")); break;
      case "hr": parent.appendChild(element("hr")); break;
      case "code_inline": parent.appendChild(withText(element("code"), token.content)); break;
      case "fence": case "code_block": parent.appendChild(codeBlock(token)); break;
      case "image": parent.appendChild(image(token)); break;
      default: if (token.content) parent.appendChild(document.createTextNode(token.content));
    }
  }

  function build(tokens, parent) {
    const stack = [parent];
    tokens.forEach(function (token) {
      const top = stack[stack.length - 1];
      if (token.nesting === 1) {
        // Hidden: the paragraphs of a tight list, whose text goes straight into the <li>.
        const node = token.hidden ? null : element(token.tag, token.attrs);
        if (node) top.appendChild(node);
        stack.push(node || top);
      } else if (token.nesting === -1) {
        stack.pop();
      } else {
        leaf(token, top);
      }
    });
  }

  // The DOM the server's HTML for `text` would give (undecorated).
  function render(text) {
    const fragment = document.createDocumentFragment();
    build(md.parse(text, {}), fragment);
    return fragment;
  }

  // --- decoration: highlighting and Copy buttons ------------------------------------------

  // highlight.js returns HTML (the code escaped, tokens wrapped in <span class="hljs-…">).
  // It is parsed in an inert document and copied keeping only spans with plain class names
  // and text, so nothing but highlighted text can come of it.
  function copySpans(from, to) {
    from.childNodes.forEach(function (node) {
      if (node.nodeType === Node.TEXT_NODE) {
        to.appendChild(document.createTextNode(node.data));
      } else if (node.nodeType === Node.ELEMENT_NODE) {
        let target = to;
        if (node.tagName === "SPAN") {
          target = document.createElement("span");
          const classes = (node.getAttribute("class") || "").split(/\s+/).filter(function (c) {
            return /^[\w-]+$/.test(c);
          });
          if (classes.length) target.className = classes.join(" ");
          to.appendChild(target);
        }
        copySpans(node, target);
      }
    });
  }

  function languageOf(code) {
    const match = /(?:^|\s)language-(\S+)/.exec(code.className);
    return match ? match[1] : "";
  }

  function highlight(code, lang) {
    if (!lang || !window.hljs || !window.hljs.getLanguage(lang)) return;
    const html = window.hljs.highlight(code.textContent, { language: lang, ignoreIllegals: true }).value;
    const inert = new DOMParser().parseFromString("<div>" + html + "</div>", "text/html");
    const out = document.createDocumentFragment();
    copySpans(inert.body.firstChild, out);
    code.replaceChildren(out);
    code.classList.add("hljs");
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // Plain-http deployments have no Clipboard API: copy from a selected, off-screen textarea.
    return new Promise(function (resolve, reject) {
      const area = document.createElement("textarea");
      area.className = "copy-buffer";
      area.value = text;
      area.setAttribute("readonly", "");
      document.body.appendChild(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  function copyButton(label, textOf) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-button";
    button.textContent = gettext("Copy");
    button.setAttribute("aria-label", label);
    button.addEventListener("click", function () {
      function say(text) {
        button.textContent = text;
        setTimeout(function () { button.textContent = gettext("Copy"); }, 1500);
      }
      copyText(textOf()).then(function () { say(gettext("Copied")); }, function () { say(gettext("Copy failed")); });
    });
    return button;
  }

  function decorateCode(code) {
    const pre = code.parentNode;
    if (pre.parentNode && pre.parentNode.classList && pre.parentNode.classList.contains("code-block")) return;
    const lang = languageOf(code);
    highlight(code, lang);
    const block = document.createElement("div");
    block.className = "code-block";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    bar.appendChild(withText(document.createElement("span"), lang || "code"));
    bar.appendChild(copyButton(gettext("Copy code"), function () { return code.textContent; }));
    pre.parentNode.insertBefore(block, pre);
    block.appendChild(bar);
    block.appendChild(pre);
  }

  function decorate(root) {
    root.querySelectorAll("pre > code").forEach(decorateCode);
  }

  // The message's Markdown source when the page has it, else its text (a person's message).
  function sourceOf(article) {
    const body = article.querySelector(".msg-body");
    if (!body) return "";
    return body.dataset.markdown !== undefined ? body.dataset.markdown : body.textContent;
  }

  function addMessageCopy(article) {
    const who = article.querySelector(".msg-who");
    if (!who || !article.querySelector(".msg-body") || who.querySelector(".copy-button")) return;
    who.appendChild(copyButton(gettext("Copy message"), function () { return sourceOf(article); }));
  }

  // --- streaming ----------------------------------------------------------------------------

  const timers = new WeakMap();
  const paintedAt = new WeakMap();

  function paint(body) {
    timers.delete(body);
    paintedAt.set(body, performance.now());
    const fragment = render(body.dataset.markdown);
    decorate(fragment);
    body.replaceChildren(fragment);
  }

  function show(body, text) {
    body.dataset.markdown = text;
    body.classList.remove("msg-plain");
    body.classList.add("md");
    if (timers.has(body)) return;
    const wait = RENDER_EVERY_MS - (performance.now() - (paintedAt.get(body) || -Infinity));
    if (wait <= 0) paint(body);
    else timers.set(body, setTimeout(paint, wait, body));
  }

  function append(body, text) {
    const sofar = body.dataset.markdown !== undefined ? body.dataset.markdown : body.textContent;
    show(body, sofar + text);
  }

  // --- wiring -------------------------------------------------------------------------------

  function enhance(node) {
    if (!(node instanceof Element)) return;
    if (node.matches(".md")) decorate(node);
    else node.querySelectorAll(".md").forEach(decorate);
    if (node.matches("article.msg")) addMessageCopy(node);
    else node.querySelectorAll("article.msg").forEach(addMessageCopy);
  }

  const thread = document.getElementById("thread");
  if (thread) {
    enhance(thread);
    // An answer still streaming when the page loaded arrives as plain text.
    thread.querySelectorAll(".msg-body.streaming").forEach(function (body) {
      show(body, body.textContent);
    });
    // Messages drawn later (chat.js, the server's HTML after a turn) are decorated in the
    // same task that inserted them, before the browser paints.
    new MutationObserver(function (records) {
      records.forEach(function (record) { record.addedNodes.forEach(enhance); });
    }).observe(thread, { childList: true, subtree: true });
  }

  window.HermesMarkdown = { show: show, append: append, render: render };
})();
