// Token mode: the page loads without a token; the first 401 shows this form, and the token lives in
// sessionStorage (this tab only).

import { fill, h } from "./dom.js";
import { nextRoute } from "./polling.js";
import { route } from "./router.js";

const TOKEN_KEY = "millpond-token";

export function savedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// The Authorization header of the saved token, if any, added to headers.
export function withToken(headers) {
  const token = savedToken();
  return token ? { ...headers, Authorization: `Bearer ${token}` } : headers;
}

// A 401 with no token asks for one; with a token, says it was refused and asks again.
export function tokenRefused() {
  askForToken(savedToken() ? "That token was refused: enter the server's token." : null);
  return new Error("the server wants a token");
}

function askForToken(message) {
  if (document.getElementById("token-form")) return;
  nextRoute();
  const input = h("input", { type: "password", id: "token-input", autocomplete: "off", placeholder: "token", size: 40 });
  const form = h("form", { id: "token-form", className: "panel token", onsubmit: (ev) => {
    ev.preventDefault();
    if (!input.value) return;
    sessionStorage.setItem(TOKEN_KEY, input.value);
    route();
  } },
  h("h1", {}, "This server needs a token"),
  h("p", { className: "muted" }, message || "It was started with --token (or MILLPOND_TOKEN). The token is kept in this tab only (sessionStorage)."),
  h("div", { className: "toolbar" }, input, h("button", { type: "submit", id: "token-submit" }, "Continue")));
  if (message) sessionStorage.removeItem(TOKEN_KEY);
  fill(document.getElementById("main"), form);
  input.focus();
}
