// LoopX workspace service worker: caches the app shell (styles, scripts, icons, the offline
// page) so the installed app opens at once; never the data. Every page and every answer of
// the workspace comes from the network, so what a person sees is never stale; without a
// network the offline page says so.
"use strict";
var SHELL = "loopx-shell-v1";
var ASSETS = ["/web/static/app.css", "/web/static/app.js", "/web/static/live.js", "/web/static/icon.svg",
  "/web/static/icon-192.png", "/web/static/icon-512.png", "/web/offline"];
self.addEventListener("install", function (e) {
  e.waitUntil(caches.open(SHELL).then(function (c) { return c.addAll(ASSETS); }).then(function () { return self.skipWaiting(); }));
});
self.addEventListener("activate", function (e) {
  e.waitUntil(caches.keys().then(function (keys) {
    return Promise.all(keys.filter(function (k) { return k !== SHELL; }).map(function (k) { return caches.delete(k); }));
  }).then(function () { return self.clients.claim(); }));
});
self.addEventListener("fetch", function (e) {
  var req = e.request;
  if (req.method !== "GET") return;
  var url = new URL(req.url);
  if (url.origin !== location.origin) return;
  if (url.pathname.indexOf("/web/static/") === 0) {
    e.respondWith(caches.match(req).then(function (hit) { return hit || fetch(req); }));
    return;
  }
  if (req.mode === "navigate") {
    e.respondWith(fetch(req).catch(function () { return caches.match("/web/offline"); }));
  }
});
