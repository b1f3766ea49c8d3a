// The Reef console's only script: a job page follows its job live. Without it the page
// still works (reload it to see the progress).
"use strict";

const TERMINAL = new Set([
  "published", "pending", "unchanged", "rejected", "invalid", "stopped", "failed",
]);

function follow(box) {
  const bar = box.querySelector("progress");
  const message = box.querySelector("[data-message]");
  const state = box.querySelector("[data-state]");
  const poll = async () => {
    let job;
    try {
      const response = await fetch(box.dataset.follow, { credentials: "same-origin" });
      if (!response.ok) return setTimeout(poll, 3000);
      job = await response.json();
    } catch (_) {
      return setTimeout(poll, 3000);
    }
    const fraction = job.progress && typeof job.progress.fraction === "number"
      ? job.progress.fraction : null;
    if (fraction === null) bar.removeAttribute("value"); else bar.value = fraction;
    message.textContent = (job.progress && job.progress.message) || "";
    state.textContent = job.state;
    state.className = "badge " + job.state;
    if (TERMINAL.has(job.state)) {
      window.location.reload();  // the outcome is rendered by the server
    } else {
      setTimeout(poll, 700);
    }
  };
  poll();
}

document.querySelectorAll("[data-follow]").forEach(follow);
