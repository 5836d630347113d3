// The login page of a multi-user server: a username and a password, POST /ui-api/login (JSON, so no other
// site can send it). The server sets the session cookie (HttpOnly, SameSite=Strict): this page keeps nothing
// secret, not in localStorage nor anywhere else. The server's own words are shown on failure (a wrong password,
// or too many failures: 429); a success loads the app afresh, on the page the address names.

import { fill, h } from "./dom.js";
import { nextRoute } from "./polling.js";

// The server's message in a failed answer, else its status.
export async function messageOf(response) {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    if (body && (body.message || body.error)) return body.message || body.error;
  } catch {
    // not JSON: the text itself (KFAM answers plain text)
  }
  return text.trim().split("\n")[0] || `${response.status} ${response.statusText}`;
}

// Replaces the page with the login form (any polling stops); message says why it shows (a session that ended).
export function showLogin(message) {
  if (document.getElementById("login-form")) return;
  nextRoute();
  document.body.classList.add("signed-out");
  const username = h("input", { type: "text", id: "login-username", autocomplete: "username", required: true, size: 30 });
  const password = h("input", { type: "password", id: "login-password", autocomplete: "current-password", required: true,
    size: 30 });
  const note = h("div", { id: "login-message", className: message ? "muted" : "", role: "alert" }, message || "");
  const submit = h("button", { type: "submit", id: "login-submit" }, "Log in");
  const form = h("form", { id: "login-form", className: "panel login", onsubmit: async (ev) => {
    ev.preventDefault();
    const sent = password.value;
    submit.disabled = true;
    note.className = "muted";
    note.textContent = "logging in…";
    try {
      const response = await fetch("/ui-api/login", { method: "POST", headers: { "Content-Type": "application/json",
        Accept: "application/json" }, body: JSON.stringify({ username: username.value, password: sent }) });
      if (response.ok) {
        location.reload();  // whoami now names the user: the app loads with a clean state
        return;
      }
      note.textContent = await messageOf(response);
    } catch (err) {
      note.textContent = err.message;
    }
    note.className = "error";
    if (password.value === sent) password.value = "";  // not what was typed again meanwhile
    submit.disabled = false;
    password.focus();
  } },
  h("h1", {}, "Log in to millpond"),
  h("div", { className: "kv form" },
    h("label", { for: "login-username" }, "Username"), h("div", {}, username),
    h("label", { for: "login-password" }, "Password"), h("div", {}, password)),
  h("p", {}, submit), note);
  fill(document.getElementById("main"), form);
  username.focus();
}
