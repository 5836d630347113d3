// #/notebooks: Kubeflow Notebooks of a namespace, as the Jupyter web app lists them: status (running, waiting with
// the reason, stopped, error), image, CPU, memory, GPUs (whole or a share), last activity, age; Connect (JupyterLab
// through the server's proxy, in a new tab), Stop / Start (the kubeflow-resource-stopped annotation), Delete.
// #/notebooks/new: the spawner form (JWA's fields: name, image, cpu, memory, gpus, workspace, datavols); the server
// checks every field (server/notebook_routes.py) and its one error is shown beside the field it names.
// The namespace is the header's (multi-user); single-user, the page's own selector over the server's namespaces.

import { api, getJSON, postJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { duration, fmtTime } from "../lib/format.js";
import { currentNamespace } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";
import { route } from "../lib/router.js";
import { session } from "../lib/session.js";

const UI_API = "/ui-api";
const PAGE_NAMESPACE_KEY = "millpond-notebooks-namespace";  // single-user: the page's own choice

// The namespace the page shows: the header's (multi-user), else the page's choice (default "default").
function shownNamespace() {
  return session.multiUser ? currentNamespace() : (sessionStorage.getItem(PAGE_NAMESPACE_KEY) || "default");
}

function notebooksUrl(namespace) {
  return `${UI_API}/namespaces/${encodeURIComponent(namespace)}/notebooks`;
}

function sendJSON(method, url, data) {
  return api(url, { method, headers: { "Content-Type": "application/json" }, body: data === undefined ? undefined : JSON.stringify(data) });
}

// Single-user: a selector over the server's namespaces (the Kubernetes API's list), redrawing the page on a change.
async function pageNamespaceChooser(onChange) {
  if (session.multiUser) return null;
  const select = h("select", { id: "notebooks-namespace", onchange: () => { sessionStorage.setItem(PAGE_NAMESPACE_KEY, select.value); onChange(); } });
  let names = ["default"];
  try {
    names = ((await getJSON("/api/v1/namespaces")).items || []).map((ns) => ns.metadata.name);
  } catch { /* the default namespace alone */ }
  const shown = shownNamespace();
  fill(select, [...new Set([...names, shown])].sort().map((ns) => h("option", { value: ns, selected: ns === shown }, ns)));
  return h("span", {}, h("label", { for: "notebooks-namespace" }, "Namespace "), select);
}

function statusCell(status) {
  const phase = (status || {}).phase || "waiting";
  return h("td", { className: "wrap nb-status" },
    h("span", { className: `state nb-${phase}`, "data-phase": phase }, phase),
    phase === "running" ? "" : h("div", { className: "muted nb-reason" }, (status || {}).message || ""));
}

function gpusText(gpus) {
  if (!gpus) return "";
  if (gpus.shared) return `share: ${gpus.message}`;
  return gpus.count ? String(gpus.count) : "";
}

async function act(button, work) {
  button.disabled = true;
  try {
    await work();
    setStatus("");
  } catch (err) {
    setStatus(err.message, true);
  } finally {
    button.disabled = false;
  }
}

function actions(nb, refresh) {
  const url = `${notebooksUrl(nb.namespace)}/${encodeURIComponent(nb.name)}`;
  const running = nb.status && nb.status.phase === "running";
  const connect = running
    ? h("a", { className: "nb-connect", href: nb.url, target: "_blank", rel: "noopener" }, "Connect")
    : h("span", { className: "nb-connect muted", title: "the notebook is not running" }, "Connect");
  const toggle = h("button", { type: "button", className: nb.stopped ? "nb-start" : "nb-stop",
    onclick: () => act(toggle, async () => { await sendJSON("PATCH", url, { stopped: !nb.stopped }); await refresh(); }) },
  nb.stopped ? "Start" : "Stop");
  const remove = h("button", { type: "button", className: "nb-delete", onclick: () => {
    if (!confirm(`Delete notebook ${nb.namespace}/${nb.name}? Its workspace volume is kept.`)) return;
    act(remove, async () => { await sendJSON("DELETE", url); await refresh(); });
  } }, "Delete");
  return h("td", { className: "nb-actions" }, connect, " ", toggle, " ", remove);
}

export async function notebooksList(main) {
  const token = routeToken;
  const body = h("tbody");
  const chooser = await pageNamespaceChooser(route);  // redrawn as a new page: the old page's polls stop
  if (token !== routeToken) return;
  main.append(h("h1", {}, "Notebooks"),
    h("div", { className: "toolbar" }, chooser, h("a", { href: "#/notebooks/new", id: "new-notebook" }, "New notebook")),
    h("table", { id: "notebooks" },
      h("thead", {}, h("tr", {}, ["Name", "Status", "Image", "CPU", "Memory", "GPUs", "Last activity", "Age", ""].map((t) => h("th", {}, t)))),
      body));
  const refresh = async () => {
    const namespace = shownNamespace();
    const rows = (await getJSON(notebooksUrl(namespace))).notebooks || [];
    if (token !== routeToken) return;
    fill(body, rows.map((nb) => h("tr", { className: "notebook-row", "data-notebook": `${nb.namespace}/${nb.name}`, "data-phase": nb.status.phase },
      h("td", { className: "nb-name" }, nb.name), statusCell(nb.status),
      h("td", { className: "nb-image", title: nb.image }, nb.shortImage),
      h("td", { className: "nb-cpu" }, nb.cpu), h("td", { className: "nb-memory" }, nb.memory),
      h("td", { className: "nb-gpus", title: nb.gpus.message }, gpusText(nb.gpus)),
      h("td", { className: "nb-activity" }, nb.last_activity ? fmtTime(nb.last_activity) : ""),
      h("td", { className: "nb-age", title: fmtTime(nb.age) }, duration(nb.age)),
      actions(nb, refresh))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 9, className: "muted" }, `No notebooks in ${namespace}. Start one with New notebook.`)));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  };
  every(REFRESH_MS, refresh);
}

// --- the spawner form ---

const FIELDS = ["name", "image", "cpu", "memory", "gpus", "workspace", "datavols", "form"];

// The id of the element that shows a field's error: datavols[2] → nb-error-datavols-2; cpuLimit → cpu's.
function errorSlot(field) {
  const match = /^datavols\[(\d+)\]$/.exec(field || "");
  if (match) return `nb-error-datavols-${match[1]}`;
  const base = { customImage: "image", cpuLimit: "cpu", memoryLimit: "memory" }[field] || field;
  return FIELDS.includes(base) ? `nb-error-${base}` : "nb-error-form";
}

function errorLine(field) {
  return h("div", { className: "error field-error", id: `nb-error-${field}` });
}

function row(label, id, ...content) {
  return [h("div", {}, h("label", { for: id }, label)), h("div", {}, ...content)];
}

function gibText(bytes) {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

export async function notebookForm(main) {
  const token = routeToken;
  const namespace = shownNamespace();
  const [config, pvcs] = await Promise.all([
    getJSON(`${UI_API}/notebooks/config`).then((answer) => answer.config),
    getJSON(`${UI_API}/namespaces/${encodeURIComponent(namespace)}/pvcs`).then((answer) => answer.pvcs || []).catch(() => []),
  ]);
  if (token !== routeToken) return;
  const machine = config.machine;
  const name = h("input", { type: "text", id: "nb-name", size: 34, placeholder: "my-notebook", autocomplete: "off" });
  const image = h("input", { type: "text", id: "nb-image", size: 60, list: "nb-images", value: config.image.value });
  const images = h("datalist", { id: "nb-images" }, config.image.options.map((one) => h("option", { value: one })));
  const cpu = h("input", { type: "text", id: "nb-cpu", size: 8, value: config.cpu.value });
  const memory = h("input", { type: "text", id: "nb-memory", size: 8, value: config.memory.value });

  const gpuKind = h("select", { id: "nb-gpu-kind", onchange: () => showGpus() },
    h("option", { value: "none" }, "None"), h("option", { value: "whole" }, "Whole GPUs (nvidia.com/gpu)"),
    h("option", { value: "shared" }, "A share of one GPU (aliyun.com/gpu-mem)"));
  const gpuCount = h("input", { type: "number", id: "nb-gpu-count", min: 1, step: 1, value: 1, size: 4 });
  const gpuMemory = h("input", { type: "text", id: "nb-gpu-memory", size: 6, value: "4", title: "GiB of the GPU's memory" });
  const gpuCore = h("input", { type: "text", id: "nb-gpu-core", size: 4, placeholder: "%", title: "percent of the GPU's compute (optional)" });
  const wholePart = h("span", { id: "nb-gpu-whole" }, " count ", gpuCount);
  const sharedPart = h("span", { id: "nb-gpu-shared" }, " GiB ", gpuMemory, " compute % ", gpuCore);
  function showGpus() {
    wholePart.hidden = gpuKind.value !== "whole";
    sharedPart.hidden = gpuKind.value !== "shared";
  }
  showGpus();

  const defaults = config.workspaceVolume.value;
  const wsKind = h("select", { id: "nb-workspace-kind", onchange: () => showWorkspace() },
    h("option", { value: "new" }, "New volume"), h("option", { value: "existing" }, "Existing volume"), h("option", { value: "none" }, "None"));
  const wsName = h("input", { type: "text", id: "nb-workspace-name", size: 30, value: defaults.newPvc.metadata.name });
  const wsSize = h("input", { type: "text", id: "nb-workspace-size", size: 6, value: defaults.newPvc.spec.resources.requests.storage });
  const claims = pvcs.filter((p) => !p.dataset);
  const wsExisting = h("select", { id: "nb-workspace-existing" }, claims.map((p) => h("option", { value: p.name }, p.name)));
  const wsNew = h("span", { id: "nb-workspace-new" }, " name ", wsName, " size ", wsSize);
  const wsOld = h("span", { id: "nb-workspace-old" }, " ", wsExisting);
  function showWorkspace() {
    wsNew.hidden = wsKind.value !== "new";
    wsOld.hidden = wsKind.value !== "existing";
  }
  showWorkspace();

  const volumes = h("div", { id: "nb-datavols" });
  const volumeRows = [];
  function addVolume() {
    const index = volumeRows.length;
    const claim = h("select", { className: "nb-datavol-claim", id: `nb-datavol-claim-${index}` },
      pvcs.map((p) => h("option", { value: p.name }, p.dataset ? `${p.name} (Fluid dataset)` : `${p.name} (PVC, ${p.size})`)));
    const mount = h("input", { type: "text", className: "nb-datavol-mount", id: `nb-datavol-mount-${index}`, size: 30 });
    const suggest = () => { if (!mount.dataset.edited) mount.value = `${defaults.mount}/${claim.value || "data"}`; };
    claim.addEventListener("change", suggest);
    mount.addEventListener("input", () => { mount.dataset.edited = "1"; });
    suggest();
    const entry = { claim, mount, removed: false };
    const line = h("div", { className: "nb-datavol", "data-index": index }, claim, " at ", mount, " ",
      h("button", { type: "button", className: "nb-datavol-remove", onclick: () => { entry.removed = true; line.remove(); } }, "Remove"),
      errorLine(`datavols-${index}`));
    volumeRows.push(entry);
    volumes.append(line);
  }
  const addButton = h("button", { type: "button", id: "nb-add-datavol", disabled: !pvcs.length, onclick: addVolume }, "Add data volume");

  function formBody() {
    const gpus = gpuKind.value === "whole" ? { num: gpuCount.value, vendor: "nvidia.com/gpu" }
      : gpuKind.value === "shared" ? { num: gpuMemory.value, vendor: "aliyun.com/gpu-mem", corePercentage: gpuCore.value }
        : { num: "none" };
    const workspace = wsKind.value === "new"
      ? { mount: defaults.mount, newPvc: { metadata: { name: wsName.value }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: wsSize.value } } } } }
      : wsKind.value === "existing" ? { mount: defaults.mount, existingSource: { persistentVolumeClaim: { claimName: wsExisting.value } } } : null;
    // the indices the server names are those of the volumes sent: removed rows are left out, so keep their slots
    const sent = volumeRows.filter((v) => !v.removed);
    return { body: { name: name.value, image: image.value, cpu: cpu.value, memory: memory.value, gpus, workspace,
      datavols: sent.map((v) => ({ mount: v.mount.value, existingSource: { persistentVolumeClaim: { claimName: v.claim.value } } })) }, sent };
  }

  const submit = h("button", { type: "submit", id: "nb-create" }, "Launch");
  const form = h("form", { id: "notebook-form", className: "panel", onsubmit: async (ev) => {
    ev.preventDefault();
    for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
    const { body, sent } = formBody();
    submit.disabled = true;
    try {
      await postJSON(notebooksUrl(namespace), body);
      location.hash = "#/notebooks";
    } catch (err) {
      let slot = errorSlot(err.field);
      const match = /^nb-error-datavols-(\d+)$/.exec(slot);
      if (match && sent[Number(match[1])]) slot = `nb-error-datavols-${volumeRows.indexOf(sent[Number(match[1])])}`;
      (document.getElementById(slot) || document.getElementById("nb-error-form")).textContent = err.message;
      submit.disabled = false;
    }
  } },
  h("h1", {}, h("a", { href: "#/notebooks" }, "Notebooks"), " / New notebook in ", namespace),
  h("div", { className: "kv form" },
    row("Name", "nb-name", name, errorLine("name")),
    row("Image", "nb-image", image, images, errorLine("image")),
    row("CPU", "nb-cpu", cpu, h("span", { className: "muted" }, ` cores (this machine has ${machine.cpu})`), errorLine("cpu")),
    row("Memory", "nb-memory", memory, h("span", { className: "muted" }, ` (such as 1Gi; this machine has ${gibText(machine.memoryBytes)})`), errorLine("memory")),
    row("GPUs", "nb-gpu-kind", gpuKind, wholePart, sharedPart,
      h("span", { className: "muted" }, ` (this machine has ${machine.gpus} GPU${machine.gpus === 1 ? "" : "s"})`), errorLine("gpus")),
    row("Workspace volume", "nb-workspace-kind", wsKind, wsNew, wsOld, h("span", { className: "muted" }, ` mounted at ${defaults.mount}`), errorLine("workspace")),
    row("Data volumes", "nb-add-datavol", volumes, addButton,
      pvcs.length ? null : h("span", { className: "muted" }, ` no PVC or dataset in ${namespace}`), errorLine("datavols"))),
  h("p", {}, submit, " ", h("a", { href: "#/notebooks" }, "Cancel")), errorLine("form"));
  main.append(form);
}

