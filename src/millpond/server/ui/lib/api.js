// The server's answers: every call adds the token (token mode), turns a 401 into the token form (the
// login page on a multi-user server, whose calls carry the session cookie and never a token) and any
// other error into an exception carrying the server's one-line message.

import { showLogin } from "./login.js";
import { session } from "./session.js";
import { tokenRefused, withToken } from "./token.js";

export const API = "/apis/v2beta1";

// The headers of a call: the saved token in token mode; nothing added on a multi-user server (the cookie).
function credentials(headers) {
  return session.multiUser ? headers : withToken(headers);
}

// A 401: the login page (multi-user: the session ended or never was), else the token form.
function refused() {
  if (!session.multiUser) return tokenRefused();
  showLogin("Your session has ended: log in again.");
  return new Error("not logged in");
}

async function failure(response) {
  const body = await response.json().catch(() => ({}));
  return new Error(body.message || `${response.status} ${response.statusText}`);
}

// A JSON call: the answer's body, or an exception with the server's message.
export async function api(url, options) {
  const opts = { ...(options || {}) };
  opts.headers = credentials({ Accept: "application/json", ...(opts.headers || {}) });
  const response = await fetch(url, opts);
  if (response.status === 401) throw refused();
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = new Error(body.message || `${response.status} ${response.statusText}`);
    err.field = body.field;  // the form field a 4xx names (the Notebooks form's routes)
    throw err;
  }
  return body;
}

export function getJSON(url) { return api(url); }

export function postJSON(url, data) {
  return api(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) });
}

// A plain-text answer (a job's log), with the token and errors handled as api() does.
export async function getText(url) {
  const response = await fetch(url, { headers: credentials({ Accept: "text/plain" }) });
  if (response.status === 401) throw refused();
  if (!response.ok) throw await failure(response);
  return response.text();
}

// A file's content as text or a blob (artifact previews): no token form on a 401, the error says why.
export async function getContent(url, kind) {
  const response = await fetch(url, { headers: credentials({}) });
  if (!response.ok) throw await failure(response);
  return kind === "blob" ? response.blob() : response.text();
}

// Every row of a paged KFP list (page_size 200), at most limit (2,000) rows.
export async function allPages(url, key, limit) {
  const rows = [];
  let pageToken = "";
  do {
    const sep = url.includes("?") ? "&" : "?";
    const page = await getJSON(`${url}${sep}page_size=200&page_token=${encodeURIComponent(pageToken)}`);
    rows.push(...(page[key] || []));
    pageToken = page.next_page_token || "";
  } while (pageToken && rows.length < (limit || 2000));
  return rows;
}

// NAMESPACE/NAME of a namespaced object, each part escaped, for its URL or its page's hash.
export function objectPath(namespace, name) {
  return `${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}
