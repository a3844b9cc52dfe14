// The chat sidebar's conversation list: the filter box, and the next page loaded as the end
// of the list scrolls into view (people with thousands of chats get the first page only).
// While pages are still missing, the filter asks the server too, which knows every title.
(function () {
  "use strict";

  const list = document.getElementById("conv-list");
  const filter = document.getElementById("conv-filter");
  if (!list || !filter) return;
  const sidebar = document.getElementById("chat-sidebar");
  const matches = document.getElementById("conv-matches");
  const noMatch = document.getElementById("conv-nomatch");
  const more = document.getElementById("conv-more");
  const listUrl = list.dataset.listUrl;
  let nextOffset = list.dataset.nextOffset ? parseInt(list.dataset.nextOffset, 10) : null;
  let loading = false;
  let searchTimer = null;

  function item(data) {
    const li = document.createElement("li");
    li.className = "conv";
    li.dataset.sessionId = data.id;
    const a = document.createElement("a");
    a.href = data.url;
    if (data.pinned) {
      const pin = document.createElement("span");
      pin.className = "pin";
      pin.title = gettext("Pinned");
      pin.textContent = "📌";
      a.append(pin, " ");
    }
    a.append(data.title);
    if (data.imported_from) {
      const tag = document.createElement("span");
      tag.className = "tag small";
      tag.title = interpolate(gettext("Imported from %s"), [data.imported_from]);
      tag.textContent = data.imported_from;
      a.append(" ", tag);
    }
    li.appendChild(a);
    return li;
  }

  function fetchPage(params) {
    return fetch(listUrl + "?" + new URLSearchParams(params), {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    });
  }

  function query() { return filter.value.trim().toLowerCase(); }

  function loadMore() {
    if (loading || nextOffset === null || query()) return;
    loading = true;
    fetchPage({ offset: nextOffset }).then(function (data) {
      // A chat started on this page shifted the pages by one: skip what is already shown.
      data.items.forEach(function (d) {
        if (!list.querySelector('[data-session-id="' + CSS.escape(d.id) + '"]')) list.appendChild(item(d));
      });
      nextOffset = data.next_offset;
      more.hidden = nextOffset === null;
    }, function () {
      more.textContent = gettext("Could not load more conversations.");
    }).finally(function () {
      loading = false;
      // Observing again reports whether the end is still in view (a tall sidebar).
      observer.unobserve(more);
      if (nextOffset !== null) observer.observe(more);
    });
  }

  const observer = new IntersectionObserver(function (entries) {
    if (entries.some(function (e) { return e.isIntersecting; })) loadMore();
  }, { root: sidebar, rootMargin: "0px 0px 200px 0px" });
  if (nextOffset !== null) observer.observe(more);

  function searchServer(q) {
    fetchPage({ q: q }).then(function (data) {
      if (query() !== q) return;  // typed on meanwhile
      matches.replaceChildren.apply(matches, data.items.map(item));
      list.hidden = true;
      matches.hidden = false;
      noMatch.hidden = data.items.length > 0;
    }, function () { /* the loaded items stay filtered */ });
  }

  filter.addEventListener("input", function () {
    const q = query();
    let shown = 0;
    list.querySelectorAll("li.conv").forEach(function (li) {
      const hit = !q || li.textContent.toLowerCase().includes(q);
      li.hidden = !hit;
      if (hit) shown += 1;
    });
    list.hidden = false;
    matches.hidden = true;
    more.hidden = nextOffset === null || Boolean(q);
    noMatch.hidden = !q || shown > 0;
    clearTimeout(searchTimer);
    if (q && nextOffset !== null) searchTimer = setTimeout(searchServer, 250, q);
  });
})();
