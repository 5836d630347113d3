// #/contributors (multi-user): Kubeflow's "Manage contributors". The namespaces the user owns (every one for an
// administrator), each with its contributors and their roles; add one (a user's name or email, and edit or view)
// or remove one. Everything goes through KFAM's REST API as Kubeflow's dashboard reaches it:
//   GET    /kfam/v1/bindings?namespace=NS (also ?user=U, ?role=R; none: every profile's) → {"bindings": [Binding…]}
//   POST   /kfam/v1/bindings  Binding      DELETE /kfam/v1/bindings  Binding
//   Binding = {"user": {"kind": "User", "name": U}, "referredNamespace": NS,
//              "RoleRef": {"kind": "ClusterRole", "name": "admin"|"edit"|"view"}}
// KFAM answers roles by their short names (kubeflow-edit → edit); admin is the namespace's owner, whom this page
// never offers to remove. A refusal shows the server's own message. Names and messages go in as text, never HTML.

import { api } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { namespaceChoices } from "../lib/namespace.js";
import { routeToken } from "../lib/polling.js";
import { session } from "../lib/session.js";

const BINDINGS = "/kfam/v1/bindings";
const ROLE_NAMES = { admin: "owner", edit: "contributor (edit)", view: "viewer (view)" };

// KFAM's answers: {"bindings": [...]} (the field is left out when there is none).
async function bindings(query) {
  const answer = await api(`${BINDINGS}?${new URLSearchParams(query)}`);
  return (answer && answer.bindings) || [];
}

// A binding as {user, namespace, role}; KFAM writes its role reference as "RoleRef" (Go's field name).
function simple(binding) {
  const ref = binding.RoleRef || binding.roleRef || {};
  return { user: (binding.user || {}).name || "", namespace: binding.referredNamespace || "", role: ref.name || "" };
}

function kfamBinding(user, namespace, role) {
  return { user: { kind: "User", name: user }, referredNamespace: namespace,
    RoleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role } };
}

function send(method, binding) {
  return api(BINDINGS, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(binding) });
}

// One namespace's panel: its contributors, a remove button each (not the owner), and the form that adds one.
function namespacePanel(namespace, found) {
  const rows = h("tbody");
  const message = h("div", { className: "error contributors-message", role: "alert" });
  const redraw = async () => {
    const token = routeToken;
    const list = (await bindings({ namespace })).map(simple);
    if (token !== routeToken) return;
    draw(list);
  };
  const act = async (button, method, binding) => {
    button.disabled = true;
    message.textContent = "";
    try {
      await send(method, binding);
      await redraw();
    } catch (err) {
      message.textContent = err.message;
      button.disabled = false;
    }
  };
  const draw = (list) => {
    fill(rows, ...list.sort((a, b) => a.user.localeCompare(b.user)).map((b) => h("tr",
      { className: "contributor", "data-user": b.user, "data-role": b.role },
      h("td", {}, b.user), h("td", { className: "role" }, ROLE_NAMES[b.role] || b.role),
      h("td", {}, b.role === "admin" ? "" : h("button", { type: "button", className: "remove-contributor",
        onclick: (ev) => act(ev.target, "DELETE", kfamBinding(b.user, namespace, b.role)) }, "Remove")))));
    if (!list.length) rows.append(h("tr", {}, h("td", { colspan: 3, className: "muted" }, "No contributors.")));
  };
  draw(found);
  const user = h("input", { type: "text", className: "contributor-email", placeholder: "user (email)", size: 30,
    required: true, "aria-label": `contributor to ${namespace}` });
  const role = h("select", { className: "contributor-role", "aria-label": "role" },
    h("option", { value: "edit" }, "contributor (edit)"), h("option", { value: "view" }, "viewer (view)"));
  const add = h("button", { type: "submit", className: "add-contributor" }, "Add");
  const form = h("form", { className: "toolbar add-contributor-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const name = user.value.trim();
    if (!name) return;
    await act(add, "POST", kfamBinding(name, namespace, role.value));
    if (!message.textContent) { user.value = ""; add.disabled = false; }
  } }, user, role, add);
  return h("section", { className: "panel namespace-contributors", "data-namespace": namespace },
    h("h2", {}, namespace),
    h("table", { className: "contributors" },
      h("thead", {}, h("tr", {}, h("th", {}, "User"), h("th", {}, "Role"), h("th", {}, ""))), rows),
    form, message);
}

// What the user is in each namespace (Kubeflow's breakdown: owner, contributor, viewer).
function membership(mine) {
  const rows = ["admin", "edit", "view"].map((role) => [role, mine.filter((b) => b.role === role).map((b) => b.namespace)])
    .filter(([, names]) => names.length);
  return h("table", { id: "my-namespaces" }, h("tbody", {}, rows.length
    ? rows.map(([role, names]) => h("tr", { "data-role": role }, h("td", {}, ROLE_NAMES[role]), h("td", {}, names.sort().join(", "))))
    : h("tr", {}, h("td", { className: "muted" }, "You are in no namespace yet."))));
}

// Each namespace's bindings (KFAM's GET ?namespace=NS) for the namespaces the selector offers: whoami's for a
// user, every one for an administrator. Asked per namespace rather than KFAM's all-profiles listing, so a
// namespace whose RoleBindings were applied by hand (no Profile) shows too. A namespace whose bindings are refused
// is left out (its message in the status line); when all are, the first refusal is the page's error.
async function namespaceBindings(names) {
  const answers = await Promise.allSettled(names.map((namespace) => bindings({ namespace })));
  const refused = answers.filter((a) => a.status === "rejected").map((a) => a.reason);
  if (refused.length && refused.length === answers.length) throw refused[0];
  if (refused.length) setStatus(refused[0].message, true);
  return new Map(names.map((ns, i) => [ns, answers[i].status === "fulfilled" ? answers[i].value.map(simple) : null])
    .filter(([, list]) => list !== null));
}

export async function contributorsPage(main) {
  const body = h("div", { id: "contributors" }, h("p", { className: "muted" }, "loading…"));
  main.append(h("h1", {}, "Manage contributors"), body);
  const token = routeToken;
  let found;
  try {
    found = await namespaceBindings(namespaceChoices());
  } catch (err) {
    if (token === routeToken) {
      fill(body, h("p", { className: "error", id: "contributors-error" }, `Contributors cannot be managed here: ${err.message}`));
    }
    return;
  }
  if (token !== routeToken) return;
  const mine = [...found.values()].flat().filter((b) => b.user === session.user);
  // an administrator manages every namespace that has KFAM's bindings (a profile's); a user the ones they own
  const owned = [...found.keys()].filter((ns) => (session.admin ? found.get(ns).length > 0
    : mine.some((b) => b.namespace === ns && b.role === "admin"))).sort();
  fill(body,
    h("h2", {}, "Your namespaces"), membership(mine),
    h("h2", {}, session.admin ? "Every namespace (administrator)" : "Namespaces you own"),
    owned.length ? owned.map((ns) => namespacePanel(ns, found.get(ns))) : h("p", { className: "muted", id: "owns-none" },
      "You own no namespace: only a namespace's owner (or an administrator) manages its contributors."));
}
