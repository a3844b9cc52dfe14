// The top bar's System / Light / Dark switch: saves the choice on the person's profile and
// repaints the page in place (no reload, so a streaming answer keeps going). The server
// renders the saved choice on <html data-theme> for every later page.
(function () {
  "use strict";

  var form = document.querySelector("form[data-theme-form]");
  if (!form) { return; }
  form.addEventListener("submit", function (event) {
    var button = event.submitter;
    if (!button || button.name !== "theme") { return; }
    event.preventDefault();
    var data = new FormData(form);
    data.set("theme", button.value);
    fetch(form.action, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-Requested-With": "fetch" },
    }).then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      document.documentElement.dataset.theme = button.value;
      form.querySelectorAll("button[name=theme]").forEach(function (b) {
        b.setAttribute("aria-pressed", b === button ? "true" : "false");
      });
    }).catch(function () {
      // Post it plainly, so the server's answer says what went wrong.
      var choice = document.createElement("input");
      choice.type = "hidden";
      choice.name = "theme";
      choice.value = button.value;
      form.appendChild(choice);
      form.submit();
    });
  });
})();
