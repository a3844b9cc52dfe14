// Account page: ask before destructive forms, and follow data exports that are being built.
(function () {
  "use strict";

  document.querySelectorAll("form.confirm[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });

  function follow(item) {
    var url = item.getAttribute("data-job-url");
    var bar = item.querySelector("progress");
    var stage = item.querySelector(".export-stage");
    var tries = 0;
    function poll() {
      tries += 1;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (job) {
          if (!job) { return; }
          if (bar) { bar.value = job.progress; bar.textContent = job.progress + "%"; }
          if (stage && job.stage) { stage.textContent = "· " + job.stage; }
          if (job.status === "done" || job.status === "failed") {
            window.location.reload();
          } else if (tries < 600) {
            window.setTimeout(poll, tries < 10 ? 1000 : 3000);
          }
        })
        .catch(function () {
          if (tries < 600) { window.setTimeout(poll, 5000); }
        });
    }
    window.setTimeout(poll, 800);
  }

  document.querySelectorAll(".export[data-status='queued'], .export[data-status='running']")
    .forEach(follow);
})();
