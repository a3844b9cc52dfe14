// The team page: copy a one-time link (ui.js confirms destructive actions).
(function () {
  "use strict";

  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      const input = document.getElementById(button.dataset.copy);
      if (!input) return;
      input.select();
      const done = function () {
        button.textContent = gettext("Copied");
        setTimeout(function () { button.textContent = gettext("Copy"); }, 2000);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(input.value).then(done, function () {
          document.execCommand("copy");
          done();
        });
      } else {
        document.execCommand("copy");
        done();
      }
    });
  });
})();
