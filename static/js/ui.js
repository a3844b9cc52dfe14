// Shared by every page (loaded by base.html before any page script): ask before a
// destructive submit, open and close disclosures, and poll a JSON URL for a job running
// on the server.
(function () {
  "use strict";

  // A form, or the button submitting it, with data-confirm="Question?" asks first. Capture
  // phase, so a dismissed question also stops the page's own submit handlers.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) { return; }
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // A button with data-disclosure and aria-controls="id" opens and closes that element
  // (class "open"): the phone menu, the chat's conversation drawer. Esc or a tap outside
  // both closes it too, so an open panel never traps a person on a small screen.
  document.querySelectorAll("button[data-disclosure][aria-controls]").forEach(function (button) {
    var panel = document.getElementById(button.getAttribute("aria-controls"));
    if (!panel) { return; }
    function isOpen() { return button.getAttribute("aria-expanded") === "true"; }
    function set(open) {
      panel.classList.toggle("open", open);
      button.setAttribute("aria-expanded", open ? "true" : "false");
    }
    button.addEventListener("click", function () { set(!isOpen()); });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && isOpen()) {
        set(false);
        button.focus();
      }
    });
    document.addEventListener("click", function (event) {
      if (isOpen() && !panel.contains(event.target) && !button.contains(event.target)) { set(false); }
    });
  });

  // Fetch `url` as JSON until the job is over. Options:
  //   delay(tries)   ms to wait before the next try, given the tries made so far;
  //   maxTries       then stop, calling onGiveUp() if given;
  //   onData(data)   show it; return true to poll again;
  //   onError(error) return true to try again after errorDelay ms. error.status is the
  //                  HTTP status, or unset when the server could not be reached.
  function poll(url, options) {
    var tries = 0;
    function again(ms) {
      if (tries < options.maxTries) {
        window.setTimeout(once, ms);
      } else if (options.onGiveUp) {
        options.onGiveUp();
      }
    }
    function once() {
      tries += 1;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) {
            var error = new Error("HTTP " + response.status);
            error.status = response.status;
            throw error;
          }
          return response.json();
        })
        .then(function (data) {
          if (options.onData(data)) { again(options.delay(tries)); }
        }, function (error) {
          if (options.onError(error)) { again(options.errorDelay); }
        });
    }
    window.setTimeout(once, options.delay(0));
  }

  window.Hermes = { poll: poll };
})();
