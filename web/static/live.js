// LoopX workspace live updates (no dependencies). The server sends an event when something
// the workspace shows changed; the page fetches itself again and swaps the regions marked
// data-live-region whose content differs. A region holding the field being typed in is left
// alone. Without JavaScript the pages work the same, only not live.
(function () {
  "use strict";
  if (!document.body.dataset.live || !window.EventSource || !window.fetch) return;
  var timer = null, busy = false;
  function schedule() { clearTimeout(timer); timer = setTimeout(refresh, 250); }
  function refresh() {
    if (busy) { schedule(); return; }
    busy = true;
    fetch(location.pathname + location.search, { credentials: "same-origin", headers: { "X-Loopx-Live": "1" } })
      .then(function (res) { return res.ok ? res.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html"), changed = false;
        document.querySelectorAll("[data-live-region]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (!fresh || fresh.innerHTML === el.innerHTML) return;
          var a = document.activeElement;
          if (a && el.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return;
          el.innerHTML = fresh.innerHTML;
          changed = true;
        });
        if (changed) {
          var s = document.getElementById("live-status");
          if (s) s.textContent = document.body.dataset.updated || "Updated";
          document.body.dataset.version = String(Number(document.body.dataset.version || "0") + 1);
        }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  var es = new EventSource("/web/events");
  es.addEventListener("change", schedule);
})();
