// The exercise console's only script (no build step, no library).
//
// 1. A player's page asks the server for its role's view every few seconds and swaps it in when
//    it changed, announcing the new clock in a polite live region (so a screen reader hears one
//    short line, not the whole page).
// 2. A form with data-confirm asks before it is sent (restarting discards decisions).
// 3. An error shown after a form is sent gets the focus, so it is read out first.
"use strict";

function refreshPlayerView() {
  const live = document.getElementById("live");
  if (!live || !live.dataset.src) return;
  const note = document.getElementById("live-note");
  const every = Number(live.dataset.every || 3) * 1000;
  let last = null;
  async function poll() {
    try {
      const response = await fetch(live.dataset.src, { cache: "no-store" });
      if (response.ok) {
        const text = await response.text();
        if (text !== last) {
          // the first answer replaces the page's own copy silently (the world may have moved
          // between the page load and this request); later changes are announced
          live.innerHTML = text;
          const summary = live.querySelector("[data-summary]");
          if (last !== null && note && summary) {
            note.textContent = "Updated: " + summary.dataset.summary;
          }
        }
        last = text;
      } else if (note) {
        note.textContent = response.status === 503
          ? "The world is running; this view follows when it pauses."
          : "The console answered " + response.status + "; retrying.";
      }
    } catch (err) {
      if (note) note.textContent = "The console cannot be reached; retrying.";
    }
    setTimeout(poll, every);
  }
  poll();
}

function confirmForms() {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  refreshPlayerView();
  confirmForms();
  const error = document.getElementById("error");
  if (error) error.focus();
});
