// Inkwell dashboard: refresh the page's #live part every few seconds, say
// loudly when the server stops answering (stale numbers are never shown as
// current), and send retries to POST /v1/jobs/{id}/retry.
"use strict";

(function () {
  const every = (Number(document.body.dataset.refresh) || 5) * 1000;
  const stale = document.getElementById("stale");
  const rendered = document.getElementById("rendered");
  const pause = document.getElementById("pause");
  let paused = false;
  let timer = null;
  let lastGood = Date.now();

  function hhmmss(d) {
    return d.toISOString().slice(11, 19) + " UTC";
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const res = await fetch(location.href, { cache: "no-store" });
      if (!res.ok) throw new Error("HTTP " + res.status);
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const fresh = doc.getElementById("live");
      const live = document.getElementById("live");
      if (fresh && live) live.replaceWith(fresh);
      const t = doc.getElementById("rendered");
      if (t && rendered) rendered.replaceWith(t);
      lastGood = Date.now();
      stale.hidden = true;
    } catch (err) {
      stale.hidden = false;
      stale.textContent = "no answer since " + hhmmss(new Date(lastGood)) + ": numbers are stale (" + err.message + ")";
    }
    if (!paused) timer = setTimeout(refresh, every);
  }

  pause.addEventListener("click", function () {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "resume" : "pause";
    if (paused) clearTimeout(timer);
    else refresh();
  });

  document.addEventListener("click", async function (e) {
    const btn = e.target.closest("button[data-retry]");
    if (!btn) return;
    const id = btn.dataset.retry;
    btn.disabled = true;
    btn.textContent = "retrying…";
    try {
      const res = await fetch("/v1/jobs/" + encodeURIComponent(id) + "/retry", { method: "POST" });
      if (!res.ok) {
        let msg = "HTTP " + res.status;
        try { msg = (await res.json()).error.message; } catch (_) { /* keep the status */ }
        throw new Error(msg);
      }
      btn.textContent = "queued";
      refresh();
    } catch (err) {
      // Keep the row as it is, with the refusal beside it, until the next refresh.
      btn.textContent = "Retry";
      btn.disabled = false;
      const note = document.createElement("span");
      note.className = "action act-bad";
      note.textContent = "retry refused: " + err.message;
      btn.after(note);
    }
  });

  timer = setTimeout(refresh, every);
})();
