// Inkwell dashboard: refresh the page's #live part every few seconds, say
// loudly when the server stops answering (stale numbers are never shown as
// current), send retries to POST /v1/jobs/{id}/retry and cancels to
// POST /v1/jobs/{id}/cancel, each with the session's CSRF token when
// signed in.
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
      if (res.status === 401) { // the session ended (signed out, revoked, restarted)
        location.assign("/signin");
        return;
      }
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

  // csrfHeaders carries the session's CSRF token, when the page was
  // rendered under a dashboard session (sign-in): the server refuses a
  // session's POST without it.
  function csrfHeaders() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? { "X-CSRF-Token": meta.content } : {};
  }

  // send POSTs one of a job's actions, as the Retry and Cancel buttons ask:
  // a refusal (409 with {"error":{code,message}}, 404) stays beside the
  // button, with the server's words, until the next refresh.
  async function send(btn, path, busy, done, label, what) {
    btn.disabled = true;
    btn.textContent = busy;
    try {
      const res = await fetch(path, { method: "POST", headers: csrfHeaders() });
      if (!res.ok) {
        let msg = "HTTP " + res.status;
        try { msg = (await res.json()).error.message; } catch (_) { /* keep the status */ }
        throw new Error(msg);
      }
      btn.textContent = done;
      refresh();
    } catch (err) {
      btn.textContent = label;
      btn.disabled = false;
      const note = document.createElement("span");
      note.className = "action act-bad";
      note.textContent = what + " refused: " + err.message;
      btn.after(note);
    }
  }

  document.addEventListener("click", function (e) {
    const retry = e.target.closest("button[data-retry]");
    if (retry) {
      send(retry, "/v1/jobs/" + encodeURIComponent(retry.dataset.retry) + "/retry", "retrying…", "queued", "Retry", "retry");
      return;
    }
    const cancel = e.target.closest("button[data-cancel]");
    if (cancel) {
      const id = cancel.dataset.cancel;
      // A running job's provider call is in flight: cancelling it does not
      // undo what the provider may already have billed.
      if (cancel.dataset.status === "running" &&
          !window.confirm("Cancel job " + id + "? Its provider call is in flight: the provider may already have billed it.")) {
        return;
      }
      send(cancel, "/v1/jobs/" + encodeURIComponent(id) + "/cancel", "cancelling…", "cancelled", "Cancel", "cancel");
    }
  });

  timer = setTimeout(refresh, every);
})();
