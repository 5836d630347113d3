// The namespace the pages show, as Kubeflow's central dashboard picks it: one of the user's namespaces
// (whoami's; an administrator's are every namespace of GET /api/v1/namespaces), remembered for this browser
// (localStorage holds its name only). Pages scope their lists with it: the KFP lists pass `namespace=` as KFP's
// UI does; millpond's lists ask for that namespace instead of all of them. In single-user mode there is no
// choice and every helper here leaves the URL as it was, so the pages ask what they always asked.

import { getJSON } from "./api.js";
import { session } from "./session.js";

const KEY = "millpond-namespace";
let choices = [];
let current = "";

// The namespaces the user may pick (sorted), and the one the pages show ("" when there is none).
export function namespaceChoices() { return choices; }
export function currentNamespace() { return session.multiUser ? current : ""; }

// Reads the choices (an administrator's from the Kubernetes API) and picks the remembered one, else the first.
export async function loadNamespaces() {
  if (!session.multiUser) return;
  const names = session.namespaces ?? ((await getJSON("/api/v1/namespaces")).items || []).map((ns) => ns.metadata.name);
  choices = [...new Set(names)].sort();
  const remembered = localStorage.getItem(KEY);
  current = choices.includes(remembered) ? remembered : (choices[0] || "");
  if (current) localStorage.setItem(KEY, current);
}

// Makes name the shown namespace (one of the choices only) and remembers it.
export function chooseNamespace(name) {
  if (!choices.includes(name)) return;
  current = name;
  localStorage.setItem(KEY, name);
}

function withParam(url, key, value) {
  return `${url}${url.includes("?") ? "&" : "?"}${key}=${encodeURIComponent(value)}`;
}

// A KFP list's URL with `namespace=` (multi-user, a namespace chosen); otherwise url unchanged.
export function scoped(url) {
  const ns = currentNamespace();
  return ns ? withParam(url, "namespace", ns) : url;
}

// A millpond list that takes `namespace` or `all_namespaces`: every namespace in single-user mode (as before),
// the chosen one in multi-user mode.
export function namespacedList(url) {
  return session.multiUser ? withParam(url, "namespace", currentNamespace()) : withParam(url, "all_namespaces", "true");
}

// Whether an object of namespace ns belongs on the page (always, in single-user mode).
export function inNamespace(ns) {
  return !session.multiUser || (ns || "default") === currentNamespace();
}
