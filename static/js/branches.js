// Edit and branch on the chat page: the inline editor of a user message (Save & send /
// Cancel, Esc cancels) and the ‹ n/m › arrows between alternatives. chat.js owns the socket
// (window.HermesChat); the server answers every tab with branch.changed, which redraws the
// thread from the branch point.
(function () {
  "use strict";

  const thread = document.getElementById("thread");
  if (!thread || !window.HermesChat) return;
  const chat = window.HermesChat;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function closeEditor(art) {
    const editor = art.querySelector(".msg-editor");
    if (editor) editor.remove();
    art.classList.remove("editing");
    const edit = art.querySelector(".msg-edit");
    if (edit) edit.focus();
  }

  function openEditor(art) {
    if (art.querySelector(".msg-editor")) return;
    const body = art.querySelector(".msg-body");
    const form = el("form", "msg-editor");
    const id = "edit-" + art.dataset.messageId;
    const label = el("label", "visually-hidden", gettext("Edit your message"));
    label.htmlFor = id;
    const box = el("textarea");
    box.id = id;
    box.rows = Math.min(12, Math.max(3, body.textContent.split("\n").length + 1));
    box.value = body.textContent;
    const note = el("p", "composer-limit editor-limit");
    note.id = id + "-limit";
    note.setAttribute("aria-live", "polite");
    note.hidden = true;
    box.setAttribute("aria-describedby", note.id);
    const actions = el("div", "editor-actions");
    const cancel = el("button", "", gettext("Cancel"));
    cancel.type = "button";
    const save = el("button", "primary", gettext("Save & send"));
    save.type = "submit";
    actions.append(cancel, save);
    form.append(label, box, note, actions);
    art.insertBefore(form, body.nextSibling);
    art.classList.add("editing");

    function refresh() {
      const over = chat.showLimit(box, note);
      save.disabled = over || !box.value.trim();
    }
    box.addEventListener("input", refresh);
    box.addEventListener("keydown", function (e) {
      if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();  // not the page's Esc (stop the answer)
        closeEditor(art);
      } else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    cancel.addEventListener("click", function () { closeEditor(art); });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      refresh();
      if (save.disabled) return;
      chat.command({
        type: "chat.edit",
        message_id: parseInt(art.dataset.messageId, 10),
        text: box.value,
      });
    });
    refresh();
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  thread.addEventListener("click", function (e) {
    const button = e.target.closest("button");
    if (!button || !thread.contains(button)) return;
    const art = button.closest("article.msg");
    if (!art) return;
    if (button.classList.contains("msg-edit")) {
      openEditor(art);
    } else if (button.dataset.branchTo) {
      chat.command({ type: "chat.branch", message_id: parseInt(button.dataset.branchTo, 10) });
    }
  });
})();
