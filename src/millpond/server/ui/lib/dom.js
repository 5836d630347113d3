// Building the page: every element is made with createElement / createElementNS and every name,
// message or log line goes in as a text node, never as HTML (a name that slipped in as markup stays text).

const SVG_NS = "http://www.w3.org/2000/svg";

function skipped(value) {
  return value === undefined || value === null || value === false;
}

// An HTML element: attributes (on* are listeners, className the class, true an empty attribute), then children.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (skipped(value)) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "className") el.className = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (skipped(child)) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// An SVG element, as h() makes HTML ones (false is a value here: SVG attributes take it as text).
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// replaceChildren, leaving out null, undefined and false (which replaceChildren would show as text: an empty
// description read "null") and flattening arrays. Every page replaces children through here (ESLint enforces it).
export function fill(el, ...children) {
  // eslint-disable-next-line no-restricted-properties -- the one call: every page replaces children through here
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// The header's status line: "updated …", or an error in red.
export function setStatus(text, isError) {
  const el = document.getElementById("status");
  el.textContent = text || "";
  el.style.color = isError ? "#ff8182" : "";
}

export function stateBadge(state) {
  return h("span", { className: `state ${state}`, "data-state": state }, state || "UNKNOWN");
}
