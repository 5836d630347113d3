// The header's part of a multi-user server: the namespace selector (the user's namespaces only: one the
// user has no access to is never offered), the user's name, a logout button, and the link to Manage
// contributors. Nothing of it is drawn in single-user mode.

import { h } from "./dom.js";
import { messageOf } from "./login.js";
import { chooseNamespace, currentNamespace, namespaceChoices } from "./namespace.js";
import { route } from "./router.js";
import { session } from "./session.js";

async function logout(button) {
  button.disabled = true;
  const response = await fetch("/ui-api/logout", { method: "POST", headers: { "Content-Type": "application/json" },
    body: "{}" }).catch((err) => ({ ok: false, err }));
  if (!response.ok) {
    button.disabled = false;
    button.title = response.err ? response.err.message : await messageOf(response);
    return;
  }
  location.reload();  // whoami names no user now: the login page
}

// Adds the selector, the user's name, logout and the Contributors link to the header.
export function drawAccount() {
  const choices = namespaceChoices();
  const select = h("select", { id: "namespace-select", title: "Namespace", disabled: !choices.length,
    onchange: () => { chooseNamespace(select.value); route(); } },
  choices.length ? choices.map((ns) => h("option", { value: ns, selected: ns === currentNamespace() }, ns))
    : h("option", { value: "" }, "(no namespace)"));
  const button = h("button", { type: "button", id: "logout", onclick: () => logout(button) }, "Log out");
  const account = h("div", { id: "account", className: "account" },
    h("label", { for: "namespace-select" }, "Namespace"), select,
    h("span", { id: "user-name", title: session.admin ? "administrator" : "" }, session.user, session.admin ? " (admin)" : ""),
    session.via === "proxy" ? null : button);  // behind an auth proxy, its own sign-out ends the session
  document.querySelector("header nav").append(h("a", { href: "#/contributors", "data-nav": "contributors" }, "Contributors"));
  document.querySelector("header").append(account);
}
