// apollo serve: live updates. A page of a running run, and the runs page, carry `data-live`
// (their event stream); when the server says something moved on, the page fetches itself
// again and swaps its <main>, without a reload (scroll position and focus stay where they
// were).
(function () {
  "use strict";
  document.documentElement.setAttribute("data-js", "ready");
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  // At most one refresh a second: a busy run's changes are coalesced, so a large run's page
  // is not rebuilt four times a second beside the run it shows.
  var busy = false, again = false, last = 0, timer = null, MIN_GAP = 1000;
  function say(text) { if (status) { status.textContent = text; } }
  var ended = false, waiting = false;
  function refresh(done) {
    if (done) { ended = true; if (timer) { clearTimeout(timer); timer = null; } }
    done = done || ended;
    if (busy) { again = true; return; }
    var wait = last + MIN_GAP - Date.now();
    if (wait > 0 && !done) {
      if (!timer) { timer = setTimeout(function () { timer = null; refresh(false); }, wait); }
      return;
    }
    // Someone typing in a filter keeps what they typed: the swap waits until they leave it.
    var active = document.activeElement;
    var main = document.getElementById("main");
    if (active && main && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      if (!waiting) {
        waiting = true;
        active.addEventListener("blur", function () { waiting = false; refresh(done); }, { once: true });
      }
      return;
    }
    busy = true;
    last = Date.now();
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text) {
          var page = new DOMParser().parseFromString(text, "text/html");
          var fresh = page.getElementById("main");
          var main = document.getElementById("main");
          if (fresh && main) { main.innerHTML = fresh.innerHTML; }
          say((done ? "finished · " : "live · ") + new Date().toLocaleTimeString());
        }
      })
      .catch(function () { say("live · could not refresh"); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(done); }
      });
  }
  var source = new EventSource(url);
  source.addEventListener("hello", function () { say("live"); });
  source.addEventListener("changed", function () { refresh(false); });
  source.addEventListener("ended", function () { source.close(); refresh(true); });
  source.onerror = function () { say("live · reconnecting"); };
})();
