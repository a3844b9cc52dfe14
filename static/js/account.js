// Account page: follow data exports being built, chat imports running and the learning that
// may follow an import (ui.js asks before destructive forms).
(function () {
  "use strict";

  function running(status) { return status === "queued" || status === "running"; }

  function follow(item) {
    var shown = item.getAttribute("data-status");
    var bar = item.querySelector("progress:not(.learn-progress)");
    var stage = item.querySelector(".job-stage");
    var learnBar = item.querySelector(".learn-progress");
    var learnStage = item.querySelector(".learn-stage");
    window.Hermes.poll(item.getAttribute("data-job-url"), {
      delay: function (tries) { return tries === 0 ? 800 : tries < 10 ? 1000 : 3000; },
      maxTries: 600,
      onData: function (job) {
        var learning = job.learning;
        if (shown === "learning") {
          // The import is done; the learning that follows it is what is shown.
          if (learning && running(learning.status)) {
            if (learnBar) { learnBar.value = learning.progress; learnBar.textContent = learning.progress + "%"; }
            if (learnStage && learning.stage) { learnStage.textContent = "· " + learning.stage; }
            return true;
          }
        } else {
          if (bar) { bar.value = job.progress; bar.textContent = job.progress + "%"; }
          if (stage && job.stage) { stage.textContent = "· " + job.stage; }
          if (running(job.status)) { return true; }
        }
        window.location.reload();
        return false;
      },
      // The server unreachable for a moment: keep trying, more slowly. An HTTP error
      // (the job is gone) ends it.
      onError: function (error) { return !error.status; },
      errorDelay: 5000,
    });
  }

  document.querySelectorAll(
    ".export[data-status='queued'], .export[data-status='running'], " +
    ".chat-import[data-status='queued'], .chat-import[data-status='running'], " +
    ".chat-import[data-status='learning']"
  ).forEach(follow);
})();
