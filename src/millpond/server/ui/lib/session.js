// Who the page is signed in as (GET /ui-api/whoami), asked once when the page loads. In single-user mode
// (the default) multiUser stays false and nothing else here matters: the UI is as it always was. In
// multi-user mode (millpond server --multi-user) the page needs a user (the login page signs one in; the
// session cookie is HttpOnly, so no script here ever sees it) and namespaces are the user's choices
// (null: an administrator, who may pick any).

// via: how the server knows the user ("session": this login; "proxy": an authenticating proxy in front, whose
// own sign-out ends it).
export const session = { multiUser: false, user: null, via: "", admin: false, namespaces: [] };

// Asks the server who this page is. whoami is public on a multi-user server; on a single-user server with a
// token it answers 401 without one, which means single-user too (the token form then asks, as before).
export async function loadSession() {
  let answer = null;
  try {
    const response = await fetch("/ui-api/whoami", { headers: { Accept: "application/json" } });
    if (response.ok) answer = await response.json();
  } catch {
    answer = null;  // the page still loads; its first API call says what is wrong
  }
  session.multiUser = Boolean(answer && answer.multi_user);
  session.user = session.multiUser ? answer.user || null : null;
  session.via = session.multiUser ? answer.via || "" : "";
  session.admin = session.multiUser && Boolean(answer.admin);
  session.namespaces = session.multiUser ? answer.namespaces ?? null : [];
  return session;
}
