// Hermes Web chat: one websocket, streaming answers, tool chips, notices.
// Streaming text from the model is rendered by markdown.js (DOM nodes, the server's
// allow-list); finished answers are replaced by HTML the server rendered and sanitised.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;
  const thread = document.getElementById("thread");
  const form = document.getElementById("composer");
  const input = document.getElementById("composer-text");
  const sendBtn = document.getElementById("send");
  const stopBtn = document.getElementById("stop");
  const regenBtn = document.getElementById("regenerate");
  const statusLine = document.getElementById("status-line");
  const toasts = document.getElementById("toasts");
  const picker = document.getElementById("model-picker");
  const convList = document.getElementById("conv-list");
  const limitNote = document.getElementById("composer-limit");
  const chatUrl = root.dataset.chatUrl;
  const maxChars = parseInt(root.dataset.maxChars || "32000", 10);
  // A running turn says it is alive every heartbeat; silence for this long while the tab
  // shows "answering" means an event was lost (the final assistant.done, say): resync.
  const silenceMs = parseFloat(root.dataset.heartbeat || "10") * 2500;
  let lastEventAt = Date.now();

  let sessionId = root.dataset.session || null;
  let busy = root.dataset.streaming === "1";
  let lastSeq = 0;
  let snapshotOf = null;  // message id of the last session.snapshot
  let turnAfter = lastMessageId();
  let socket = null;
  let retry = 0;
  const pending = [];
  // The text of a chat.send ("" for a regenerate) the server has not accepted yet: a
  // refusal puts it back.
  let sentText = null;
  let lastDoneId = 0;  // the answer the last assistant.done closed (a turn error's note)
  // After branch.changed: the thread is redrawn from this message on until the turn ends.
  let branchAfter = null;
  let refreshing = Promise.resolve();

  function lastMessageId() {
    let max = 0;
    thread.querySelectorAll("[data-message-id]").forEach(function (el) {
      const id = parseInt(el.dataset.messageId, 10);
      if (id > max) max = id;
    });
    return max;
  }

  function setBusy(value) {
    busy = value;
    stopBtn.hidden = !value;
    updateSend();
    thread.setAttribute("aria-busy", value ? "true" : "false");
    regenBtn.hidden = value || !sessionId || !thread.querySelector(".msg-assistant:last-of-type");
    if (!value) statusLine.textContent = "";
  }

  function scrollDown() {
    const nearBottom = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 160;
    if (nearBottom) thread.scrollTop = thread.scrollHeight;
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // In a chat, picking another model switches it (PATCH); the server's model_switched
  // notice then shows the "Switched to" marker in every tab. A new chat sends it with the
  // first message.
  if (picker) {
    let chosen = picker.value;
    picker.addEventListener("change", function () {
      if (!sessionId) { chosen = picker.value; return; }
      const token = document.querySelector("input[name=csrfmiddlewaretoken]");
      fetch("/api/sessions/" + encodeURIComponent(sessionId) + "/", {
        method: "PATCH",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json",
                   "X-CSRFToken": token ? token.value : "" },
        body: JSON.stringify({ model: picker.value }),
      }).then(function (response) {
        if (response.ok) { chosen = picker.value; return null; }
        return response.json().then(function (body) {
          picker.value = chosen;
          toast((body.error && body.error.message) || gettext("Could not switch the model."), "error");
        });
      }).catch(function () {
        picker.value = chosen;
        toast(gettext("Could not switch the model."), "error");
      });
    });
  }

  function toast(text, kind) {
    const t = el("div", "toast toast-" + (kind || "info"), text);
    toasts.appendChild(t);
    setTimeout(function () { t.remove(); }, 6000);
  }

  function removeEmptyHint() {
    const hint = document.getElementById("thread-empty");
    if (hint) hint.remove();
  }

  function addUserBubble(text) {
    removeEmptyHint();
    const art = el("article", "msg msg-user msg-pending");
    art.appendChild(el("div", "msg-who", gettext("You")));
    art.appendChild(el("div", "msg-body msg-plain", text));
    thread.appendChild(art);
    thread.scrollTop = thread.scrollHeight;
  }

  // The element of the assistant message `messageId`, drawn now if it is not on the page.
  function assistantElement(messageId) {
    let art = messageId ? thread.querySelector('[data-message-id="' + messageId + '"]') : null;
    if (!art) {
      art = el("article", "msg msg-assistant msg-streaming");
      if (messageId) art.dataset.messageId = messageId;
      art.appendChild(el("div", "msg-who", "Hermes"));
      thread.appendChild(art);
    }
    return art;
  }

  function streamingBubble(messageId) {
    const art = assistantElement(messageId);
    let body = art.querySelector(".msg-body");
    if (!body) {
      body = el("div", "msg-body msg-plain streaming");
      art.insertBefore(body, art.querySelector(".chips"));
    }
    return { art: art, body: body };
  }

  function chipsOf(art) {
    let chips = art.querySelector(".chips");
    if (!chips) {
      chips = el("div", "chips");
      art.appendChild(chips);
    }
    return chips;
  }

  function errorNote(text) {
    const note = el("p", "msg-note msg-error", text);
    note.setAttribute("role", "alert");
    thread.appendChild(note);
    thread.scrollTop = thread.scrollHeight;
  }

  // One refresh at a time: two overlapping ones (assistant.done, then error) would both
  // insert the same messages.
  function refreshThread() {
    refreshing = refreshing.then(loadNewMessages);
    return refreshing;
  }

  async function loadNewMessages() {
    if (!sessionId) return;
    const url = root.dataset.messagesUrl + "?after=" + turnAfter;
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return;
      const html = await response.text();
      // Drop what this turn drew locally, then insert the server's rendering.
      Array.from(thread.children).forEach(function (child) {
        const id = parseInt(child.dataset.messageId || "0", 10);
        if (child.matches(".msg-pending, .msg-streaming, .msg-note") || id > turnAfter) child.remove();
      });
      const tpl = document.createElement("template");
      tpl.innerHTML = html;
      thread.appendChild(tpl.content);
      turnAfter = branchAfter !== null ? branchAfter : lastMessageId();
      thread.scrollTop = thread.scrollHeight;
    } catch (err) {
      // The next event or a reload will bring the thread up to date.
    }
  }

  // Point the page (address, refresh URL, Inspect and Options) at conversation `id`.
  function setSession(id) {
    sessionId = id;
    root.dataset.session = id;
    const path = chatUrl + encodeURIComponent(id) + "/";
    root.dataset.messagesUrl = path + "messages/";
    history.replaceState(null, "", path);
    document.querySelectorAll("[data-session-url]").forEach(function (node) {
      const url = node.dataset.sessionUrl.replace("__session__", encodeURIComponent(id));
      node.setAttribute(node.tagName === "FORM" ? "action" : "href", url);
      node.hidden = false;
    });
    document.getElementById("conv-menu").hidden = false;
  }

  function switchTo(newId) {
    const oldId = sessionId;
    setSession(newId);
    const item = convList.querySelector('[data-session-id="' + oldId + '"]');
    if (item) {
      item.dataset.sessionId = newId;
      const link = item.querySelector("a");
      if (link) link.href = chatUrl + encodeURIComponent(newId) + "/";
    }
    send({ type: "chat.subscribe", session: newId });
  }

  function onSessionStarted(ev) {
    const temporary = document.getElementById("temporary");
    if (temporary) temporary.closest("label").hidden = true;
    setSession(ev.session);
    document.getElementById("temporary-banner").hidden = !ev.temporary;
    document.getElementById("rename-title").value = ev.title || "";
    document.getElementById("chat-title").textContent = ev.title || gettext("Conversation");
    document.title = (ev.title || gettext("Conversation")) + " · Hermes Web";
    const empty = document.getElementById("conv-empty");
    if (empty) empty.remove();
    const li = el("li", "conv current");
    li.dataset.sessionId = sessionId;
    const a = el("a", "", ev.title || gettext("Untitled"));
    a.href = chatUrl + encodeURIComponent(sessionId) + "/";
    a.setAttribute("aria-current", "page");
    li.appendChild(a);
    convList.querySelectorAll(".conv.current").forEach(function (c) { c.classList.remove("current"); });
    convList.insertBefore(li, convList.firstChild);
  }

  // A request the server refused before any turn began (too long, quota, busy): the
  // message was not saved, so its bubble goes and its text returns to the composer.
  function refused(ev) {
    if (ev.code === "realtime_unavailable") {
      // The socket closes and reconnects; what was saved comes back with the resync.
      statusLine.textContent = ev.message;
      return;
    }
    if (ev.code === "compressing" && sentText !== null) {
      // The message was saved before the wait: it stays, and Regenerate answers it.
      sentText = null;
      refreshThread().then(function () { setBusy(false); errorNote(ev.message); });
      return;
    }
    if (sentText !== null) {
      thread.querySelectorAll(".msg-pending").forEach(function (p) { p.remove(); });
      if (!input.value) input.value = sentText;
      sentText = null;
      setBusy(false);
      updateLimit();
    }
    if (ev.code === "turn_in_progress") toast(ev.message, "warn");
    else errorNote(ev.message);
  }

  // A turn that failed: its answer (saved as failed or interrupted) carries the note; live,
  // the note says exactly what the server met (the saved one keeps only the kind).
  function turnFailed(ev) {
    refreshThread().then(function () {
      branchAfter = null;
      const art = thread.querySelector('[data-message-id="' + lastDoneId + '"]');
      const note = art && art.querySelector(".msg-note");
      if (note) note.textContent = interpolate(art.dataset.status === "failed" ? gettext("No answer. %s") : gettext("Interrupted: %s"), [ev.message]);
      else errorNote(ev.message);
      setBusy(false);
    });
  }

  const handlers = {
    "session.started": onSessionStarted,
    "session.snapshot": function (ev) {
      setBusy(true);
      lastSeq = ev.seq || 0;
      snapshotOf = ev.message_id;
      const bubble = streamingBubble(ev.message_id);
      HermesMarkdown.show(bubble.body, ev.text || "");
      statusLine.textContent = gettext("Hermes is answering…");
    },
    "assistant.delta": function (ev) {
      if (!busy) setBusy(true);
      const bubble = streamingBubble(ev.message_id);
      HermesMarkdown.append(bubble.body, ev.text);
      statusLine.textContent = "";
      scrollDown();
    },
    "tool.call": function (ev) {
      const chip = el("details", "chip chip-running");
      chip.dataset.callId = ev.call_id || "";
      const summary = el("summary");
      summary.appendChild(el("span", "chip-name", ev.name));
      summary.appendChild(document.createTextNode(" · " + gettext("running…")));
      chip.appendChild(summary);
      const detail = el("div", "chip-detail");
      detail.appendChild(el("div", "muted", gettext("Arguments")));
      detail.appendChild(el("pre", "", ev.arguments || ""));
      chip.appendChild(detail);
      chipsOf(assistantElement(ev.message_id)).appendChild(chip);
      statusLine.textContent = interpolate(gettext("Using %s…"), [ev.name]);
      scrollDown();
    },
    "tool.result": function (ev) {
      // Providers may reuse call ids across turns: the newest chip with the id is this one.
      const matches = thread.querySelectorAll('.chip[data-call-id="' + (ev.call_id || "") + '"]');
      const chip = matches[matches.length - 1];
      if (!chip) return;
      chip.classList.remove("chip-running");
      if (!ev.ok) chip.classList.add("chip-failed");
      const summary = chip.querySelector("summary");
      summary.textContent = "";
      summary.appendChild(el("span", "chip-name", ev.name));
      summary.appendChild(document.createTextNode(" · " + ev.summary));
      statusLine.textContent = "";
    },
    "notice": function (ev) {
      if (ev.new_session && ev.new_session !== sessionId) {
        // Compressed: the conversation continues in a new part (same place in the list).
        switchTo(ev.new_session);
      }
      if (ev.kind === "compressed" && !ev.new_session) statusLine.textContent = ev.text;
      if (ev.kind === "model_switched") {
        // The marker in the conversation says it; no toast on top.
        if (picker && ev.model) picker.value = ev.model.id;
        refreshThread();
        return;
      }
      toast(ev.text, ev.kind);
    },
    "session.idle": function (ev) {
      // No turn runs: a tab still "answering" lost the end of it. A message waiting for a
      // compression has not been answered yet: keep waiting.
      if (ev.compressing) {
        statusLine.textContent = gettext("Compressing earlier messages…");
        return;
      }
      if (busy && sentText === null) {
        // Redraw from the answer that was left streaming (the page may have drawn it).
        const open = thread.querySelector(".msg-streaming[data-message-id]");
        if (open) turnAfter = Math.min(turnAfter, parseInt(open.dataset.messageId, 10) - 1);
        refreshThread().then(function () { setBusy(false); });
      }
    },
    "assistant.done": function (ev) {
      // The turn is over: show the server's rendering of everything it produced.
      lastDoneId = ev.message_id;
      refreshThread().then(function () { branchAfter = null; setBusy(false); });
    },
    // The selected path changed (an edit, a regeneration, ‹ › here or in another tab):
    // redraw from the branch point; a turn that began meanwhile resends what it wrote.
    "branch.changed": function (ev) {
      branchAfter = ev.after || 0;
      turnAfter = branchAfter;
      refreshThread().then(function () {
        if (thread.querySelector(".msg-streaming")) {
          setBusy(true);
          send({ type: "chat.subscribe", session: sessionId });
        } else {
          branchAfter = null;
          turnAfter = lastMessageId();
          setBusy(busy);
        }
      });
    },
    "error": function (ev) {
      // Events of a turn are numbered; a refusal of the request itself is not.
      if (typeof ev.seq === "number") turnFailed(ev);
      else refused(ev);
    },
  };

  function dispatch(ev) {
    if (ev.session && sessionId && ev.session !== sessionId && !ev.new_session) return;
    lastEventAt = Date.now();
    if (ev.type === "turn.alive") {
      // The turn's last seq: anything past ours was lost (a final assistant.done too).
      if (ev.seq > lastSeq) send({ type: "chat.subscribe", session: sessionId });
      if (!busy) setBusy(true);
      return;
    }
    if (typeof ev.seq === "number") {
      const isDelta = ev.type === "assistant.delta";
      // Every turn numbers its events from 1 (a tab that follows the chat sees many
      // turns); a delta already contained in a snapshot does not start a new one.
      if (ev.seq === 1 && !(isDelta && ev.message_id === snapshotOf)) lastSeq = 0;
      // Text that arrives after the snapshot which already contains it.
      if (isDelta && ev.seq <= lastSeq) return;
      if (lastSeq && ev.seq > lastSeq + 1) {
        // Missed events (a full channel drops silently): ask for a snapshot.
        send({ type: "chat.subscribe", session: sessionId });
      }
      lastSeq = Math.max(lastSeq, ev.seq);
      sentText = null;  // a turn is running: the message was saved
    }
    const handler = handlers[ev.type];
    if (handler) handler(ev);
  }

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(message));
    } else {
      pending.push(message);
      connect();
    }
  }

  function connect() {
    if (socket && (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING)) return;
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(proto + location.host + "/ws/chat/");
    socket.addEventListener("open", function () {
      retry = 0;
      statusLine.textContent = busy ? gettext("Hermes is answering…") : "";
      if (sessionId) socket.send(JSON.stringify({ type: "chat.subscribe", session: sessionId }));
      while (pending.length) socket.send(JSON.stringify(pending.shift()));
    });
    socket.addEventListener("message", function (e) {
      try { dispatch(JSON.parse(e.data)); } catch (err) { /* ignore malformed frames */ }
    });
    socket.addEventListener("close", function (e) {
      if (e.code === 4401) {
        statusLine.textContent = gettext("You are logged out. Reload the page to log in again.");
        return;
      }
      statusLine.textContent = gettext("Reconnecting…");
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 500 * Math.pow(2, retry - 1));
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    const text = input.value;
    if (!text.trim() || busy || overLimit()) return;
    turnAfter = lastMessageId();
    lastDoneId = 0;
    addUserBubble(text);
    sentText = text;
    input.value = "";
    updateLimit();
    lastSeq = 0;
    setBusy(true);
    statusLine.textContent = gettext("Sending…");
    const temporary = document.getElementById("temporary");
    const message = { type: "chat.send", session: sessionId, text: text };
    if (!sessionId && temporary && temporary.checked) message.temporary = true;
    if (!sessionId && picker) message.model = picker.value;
    send(message);
  });

  // Python counts code points, JavaScript UTF-16 units: they differ only for astral
  // characters, so the exact (slower) count is needed only near the limit.
  function charCount(text) {
    return text.length <= maxChars ? text.length : Array.from(text).length;
  }

  function overLimit() {
    return charCount(input.value) > maxChars;
  }

  // Nothing is cut: past the limit a text box keeps the text, says by how much it is over
  // and sending waits; close to it, a counter. `note` shows it, `box` is marked invalid.
  function showLimit(box, note) {
    const count = charCount(box.value);
    const over = count > maxChars;
    note.hidden = count < maxChars * 0.9;
    note.classList.toggle("over", over);
    const figures = {
      count: count.toLocaleString("en"),
      limit: maxChars.toLocaleString("en"),
      over: (count - maxChars).toLocaleString("en"),
    };
    note.textContent = interpolate(over
      ? gettext("This message is %(count)s characters; the limit is %(limit)s. Shorten it by %(over)s to send it.")
      : gettext("%(count)s / %(limit)s characters"), figures, true);
    box.setAttribute("aria-invalid", over ? "true" : "false");
    return over;
  }

  function updateLimit() {
    showLimit(input, limitNote);
    updateSend();
  }

  function updateSend() {
    sendBtn.disabled = busy || input.disabled || overLimit();
  }

  input.addEventListener("input", updateLimit);

  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  stopBtn.addEventListener("click", function () {
    if (sessionId) send({ type: "chat.stop", session: sessionId });
    statusLine.textContent = gettext("Stopping…");
  });

  // A turn on another path (chat.edit, chat.regenerate) or a switch (chat.branch): the
  // server answers every tab with branch.changed, which redraws the thread; a refusal
  // (turn_in_progress, …) is shown and leaves the page as it was.
  function pathCommand(message) {
    if (!sessionId) return;
    message.session = sessionId;
    if (message.type !== "chat.branch") {
      if (busy) { toast(gettext("The agent is still answering in this conversation. Wait or press Stop."), "warn"); return; }
      lastSeq = 0;
      lastDoneId = 0;
      sentText = "";
      setBusy(true);
      statusLine.textContent = gettext("Sending…");
    }
    send(message);
  }

  regenBtn.addEventListener("click", function () {
    if (!busy) pathCommand({ type: "chat.regenerate" });
  });

  // For static/js/branches.js (Edit and ‹ › on the messages).
  window.HermesChat = { command: pathCommand, showLimit: showLimit, isBusy: function () { return busy; } };

  setInterval(function () {
    if (!busy || !sessionId || !socket || socket.readyState !== WebSocket.OPEN) return;
    if (Date.now() - lastEventAt < silenceMs) return;
    lastEventAt = Date.now();
    send({ type: "chat.subscribe", session: sessionId });
  }, 1000);

  setBusy(busy);
  updateLimit();
  thread.scrollTop = thread.scrollHeight;
  connect();
  if (!input.disabled) input.focus();
})();
