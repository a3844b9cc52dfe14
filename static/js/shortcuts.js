// Chat keyboard shortcuts, listed on the ? sheet (templates/chat/chat.html). Chosen not to
// clash with the browser: Ctrl/Cmd+Shift+O is ChatGPT's "new chat", "/" is the common
// "go to the input" key, and Shift+Esc (Chrome's task manager) is left alone.
(function () {
  "use strict";

  const sheet = document.getElementById("shortcuts");
  const root = document.getElementById("chat");
  if (!sheet || !root) return;
  const input = document.getElementById("composer-text");
  const stopBtn = document.getElementById("stop");

  function typing(target) {
    return Boolean(target.closest && target.closest("input, textarea, select, [contenteditable]"));
  }

  document.querySelectorAll("[data-shortcuts-open]").forEach(function (button) {
    button.addEventListener("click", function () { sheet.showModal(); });
  });

  // Capture phase, before ui.js closes an open menu on Esc: that Esc is for the menu.
  window.addEventListener("keydown", function (e) {
    if (e.isComposing || sheet.open) return;  // the open sheet closes itself on Esc
    const mod = e.ctrlKey || e.metaKey;
    if (mod && e.shiftKey && !e.altKey && e.key.toLowerCase() === "o") {
      e.preventDefault();
      window.location.assign(root.dataset.chatUrl);
    } else if (e.key === "Escape" && !mod && !e.shiftKey && !stopBtn.hidden) {
      // Not the Esc that clears the filter box or closes an open menu.
      if (typing(e.target) && e.target !== input) return;
      if (document.querySelector('[data-disclosure][aria-expanded="true"]')) return;
      stopBtn.click();
    } else if (!mod && !e.altKey && !typing(e.target)) {
      if (e.key === "?") {
        e.preventDefault();
        sheet.showModal();
      } else if (e.key === "/" && !input.disabled) {
        e.preventDefault();
        input.focus();
      }
    }
  }, true);
})();
