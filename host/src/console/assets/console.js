// ahp console — live regions. Each element with data-live="URL" is polled every data-every
// milliseconds (bounded: at least one second apart) and its content replaced when the server's
// X-Live-Version changed. Each poll sends the version it holds, so a region that can tell
// cheaply answers 204 when nothing changed; a region rendered with its version (data-version)
// is not fetched again until it changes. The server renders the HTML (every value escaped);
// nothing here builds markup from data. A signed-out session goes back to the sign-in page.
"use strict";
for (const region of document.querySelectorAll("[data-live]")) {
  const every = Math.max(1000, Number(region.dataset.every) || 2000);
  let version = region.dataset.version || null;
  const tick = async () => {
    try {
      const headers = version === null ? {} : { "X-Live-Version": version };
      const response = await fetch(region.dataset.live, { credentials: "same-origin", headers });
      if (response.status === 401) {
        window.location.assign("/console/sign-in");
        return;
      }
      const next = response.headers.get("X-Live-Version");
      if (response.status === 200 && next !== version) {
        const html = await response.text();
        region.innerHTML = html;
        version = next;
        region.dataset.version = next;
      }
    } catch (_) {
      // The server is restarting or the network dropped: try again at the next tick.
    }
    window.setTimeout(tick, every);
  };
  tick();
}
