// Sessions page: "Summarise" runs the summariser in the background (POST to the API) and
// polls its status (ui.js) until the summary is there. Text is only ever set with textContent.
(function () {
  "use strict";

  var POLL_MS = 1500;
  var MAX_POLLS = 160; // about four minutes, past the server's task time limit

  var STATUS_TEXT = {
    pending: gettext("Waiting for a worker…"),
    running: gettext("Summarising…"),
    failed: gettext("The summary failed: %(error)s The snippets above still apply."),
  };

  function show(box, data) {
    box.setAttribute("data-status", data.status);
    box.classList.remove("empty-summary");
    if (data.status === "done") {
      box.textContent = data.summary || "";
    } else if (data.status === "failed") {
      box.textContent = interpolate(STATUS_TEXT.failed, { error: data.error || gettext("unknown error") }, true);
    } else {
      box.textContent = STATUS_TEXT[data.status] || STATUS_TEXT.running;
    }
  }

  function follow(box, url) {
    window.Hermes.poll(url, {
      delay: function () { return POLL_MS; },
      maxTries: MAX_POLLS,
      onData: function (data) {
        show(box, data);
        return data.status === "pending" || data.status === "running";
      },
      onError: function () {
        box.textContent = gettext("Lost contact with the server; reload the page to see the summary.");
        return false;
      },
      onGiveUp: function () {
        box.textContent = gettext("Still summarising; reload the page later to see it.");
      },
    });
  }

  function detailUrl(form, id) {
    return form.getAttribute("data-api").replace(/\/?$/, "/") + id + "/";
  }

  document.querySelectorAll("form.summarise-form").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var box = form.parentElement.querySelector(".summary");
      var button = form.querySelector("button");
      var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
      button.disabled = true;
      show(box, { status: "pending" });
      fetch(form.getAttribute("data-api"), {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": token },
        body: JSON.stringify({
          q: form.querySelector("input[name=q]").value,
          session_id: form.querySelector("input[name=session_id]").value,
        }),
      })
        .then(function (response) {
          return response.json().then(function (data) { return { ok: response.ok, data: data }; });
        })
        .then(function (result) {
          button.disabled = false;
          if (!result.ok) {
            var error = result.data && result.data.error;
            show(box, { status: "failed", error: error ? error.message : "request refused" });
            return;
          }
          show(box, result.data);
          if (result.data.status === "pending" || result.data.status === "running") {
            follow(box, detailUrl(form, result.data.id));
          }
        })
        .catch(function () {
          button.disabled = false;
          show(box, { status: "failed", error: "could not reach the server." });
        });
    });
  });

  // Summaries already under way when the page was rendered.
  document.querySelectorAll(".summary[data-summary-url]").forEach(function (box) {
    var status = box.getAttribute("data-status");
    if (status === "pending" || status === "running") {
      follow(box, box.getAttribute("data-summary-url"));
    }
  });
})();
