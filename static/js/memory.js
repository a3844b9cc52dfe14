// Memory page: show how long an entry is as it is typed (ui.js asks before deleting).
(function () {
  "use strict";

  document.querySelectorAll("textarea[data-counter]").forEach(function (area) {
    var out = document.createElement("p");
    out.className = "char-count";
    out.setAttribute("aria-live", "polite");
    area.insertAdjacentElement("afterend", out);
    var update = function () {
      var n = area.value.trim().length;
      out.textContent = interpolate(ngettext("%s character", "%s characters", n), [n.toLocaleString(document.documentElement.lang)]);
    };
    area.addEventListener("input", update);
    update();
  });
})();
