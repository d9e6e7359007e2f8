// apollo serve: live updates. A page of a running run carries `data-live` (its event
// stream); when the server says the run moved on, the page fetches itself again and swaps
// its <main>, without a reload (scroll position and focus stay where they were).
(function () {
  "use strict";
  document.documentElement.setAttribute("data-js", "ready");
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  var busy = false, again = false;
  function say(text) { if (status) { status.textContent = text; } }
  function refresh(done) {
    if (busy) { again = true; return; }
    busy = true;
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
