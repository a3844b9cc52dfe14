// Account page: follow data exports being built and chat imports running (ui.js asks before
// destructive forms).
(function () {
  "use strict";

  function follow(item) {
    var bar = item.querySelector("progress");
    var stage = item.querySelector(".job-stage");
    window.Hermes.poll(item.getAttribute("data-job-url"), {
      delay: function (tries) { return tries === 0 ? 800 : tries < 10 ? 1000 : 3000; },
      maxTries: 600,
      onData: function (job) {
        if (bar) { bar.value = job.progress; bar.textContent = job.progress + "%"; }
        if (stage && job.stage) { stage.textContent = "· " + job.stage; }
        if (job.status === "done" || job.status === "failed") {
          window.location.reload();
          return false;
        }
        return true;
      },
      // The server unreachable for a moment: keep trying, more slowly. An HTTP error
      // (the job is gone) ends it.
      onError: function (error) { return !error.status; },
      errorDelay: 5000,
    });
  }

  document.querySelectorAll(
    ".export[data-status='queued'], .export[data-status='running'], " +
    ".chat-import[data-status='queued'], .chat-import[data-status='running']"
  ).forEach(follow);
})();
