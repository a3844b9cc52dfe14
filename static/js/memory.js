// Memory page: confirm before deleting, and show how long an entry is as it is typed.
(function () {
  "use strict";

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });

  document.querySelectorAll("textarea[data-counter]").forEach(function (area) {
    var out = document.createElement("p");
    out.className = "char-count";
    out.setAttribute("aria-live", "polite");
    area.insertAdjacentElement("afterend", out);
    var update = function () {
      var n = area.value.trim().length;
      out.textContent = n.toLocaleString() + " character" + (n === 1 ? "" : "s");
    };
    area.addEventListener("input", update);
    update();
  });
})();
