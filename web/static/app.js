// LoopX workspace: installs the service worker (the app shell for the home screen) and lets
// owners drag todos between the board's columns. Both only add to pages that work without
// script: every move is also a button, which works by keyboard and on a phone.
(function () {
  "use strict";
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/web/sw.js", { scope: "/web/" }).catch(function () {});
  }
  function board() {
    var b = document.querySelector("[data-board]");
    if (!b || b.dataset.ready) return;
    b.dataset.ready = "1";
    var dragged = null;
    b.addEventListener("dragstart", function (e) {
      var li = e.target.closest && e.target.closest("li[data-todo]");
      if (!li) return;
      dragged = li;
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", li.dataset.todo);
    });
    b.addEventListener("dragover", function (e) {
      if (dragged && e.target.closest && e.target.closest("[data-col]")) e.preventDefault();
    });
    b.addEventListener("drop", function (e) {
      var col = e.target.closest && e.target.closest("[data-col]");
      if (!dragged || !col) return;
      e.preventDefault();
      var form = dragged.querySelector("form.move");
      var to = col.dataset.col;
      dragged = null;
      if (!form || form.closest("[data-col]") === col) return;
      var input = document.createElement("input");
      input.type = "hidden"; input.name = "to"; input.value = to;
      form.appendChild(input);
      form.submit();
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", board);
  else board();
  // The live script swaps regions; the board may be new after a swap.
  new MutationObserver(board).observe(document.documentElement, { childList: true, subtree: true });
})();
