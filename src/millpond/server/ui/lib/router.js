// Hash routes: the hash as path segments (with the links kfp.Client prints folded into ours), and
// route(), which clears the page and hands it to the page the app registered for those segments.

import { fill, setStatus } from "./dom.js";
import { nextRoute } from "./polling.js";

let showPage = null;  // (parts, main) => draws the page: set once by the app (start)

// A hash as path segments, with the KFP UI's forms (kfp.Client prints them) folded into ours:
// runs/details/ID → runs/ID, pipelines/details/ID/version/VER → pipelines/ID/VER.
export function routeParts(hash) {
  const parts = (hash.replace(/^#\/?/, "").split("?")[0] || "runs").split("/").filter((p) => p !== "").map(decodeURIComponent);
  if (["runs", "experiments", "pipelines", "recurring"].includes(parts[0]) && parts[1] === "details") parts.splice(1, 1);
  if (parts[0] === "pipelines" && parts[2] === "version") parts.splice(2, 1);
  return parts.length ? parts : ["runs"];
}

// Draws the page the hash names, from scratch (also after an action, to follow a run that runs again).
export function route() {
  nextRoute();
  setStatus("");
  const main = document.getElementById("main");
  fill(main);
  const parts = routeParts(location.hash);
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.nav === (parts[0] === "archive" ? "runs" : parts[0]));
  }
  return showPage(parts, main);
}

// Routes every hash change to pages(parts, main), and draws the page the address names now.
export function start(pages) {
  showPage = pages;
  window.addEventListener("hashchange", route);
  route();
}
