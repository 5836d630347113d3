// #/katib: Katib's Experiments (kubeflow.org/v1beta1), as Katib's UI lists them: status condition, trials
// succeeded / running / failed, the best trial and its objective value.
// #/katib/NAMESPACE/NAME (also Katib's own #/katib/hp_monitor/NAMESPACE/NAME, which its SDK prints): one
// experiment: its status and best trial, a scatter plot of each parameter against the objective (SVG, one point
// per trial with a value, the best one marked), the trials table (assignments, objective, other metrics, state)
// and a trial's log, read from its pods through the Kubernetes API (Katib's katib.kubeflow.org/trial label).
// Every name, value and log line goes into the page as text (h(), s()), never as HTML.

import { getJSON, getText, objectPath } from "../lib/api.js";
import { fill, h, s, setStatus } from "../lib/dom.js";
import { duration, fmtTime } from "../lib/format.js";
import { namespacedList } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const EXPERIMENTS = "/ui-api/katib/experiments";
const TRIAL_LABEL = "katib.kubeflow.org/trial";
const LOG_LINES = 500;
const FINAL = new Set(["Succeeded", "Failed"]);
const TRIAL_FINAL = new Set(["Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable"]);
// Katib's condition types on the badge colours the other pages use
const BADGE = { Succeeded: "SUCCEEDED", Failed: "FAILED", Running: "RUNNING", Restarting: "RUNNING", Created: "PENDING",
  Pending: "PENDING", Killed: "CANCELED", EarlyStopped: "SKIPPED", MetricsUnavailable: "FAILED" };

function badge(condition) {
  const type = (condition && condition.type) || "Created";
  return h("span", { className: `state ${BADGE[type] || "PENDING"}`, "data-state": type, title: (condition && condition.message) || "" }, type);
}

function numberText(value) {
  if (value === null || value === undefined) return "";
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
}

function bestText(exp) {
  if (!exp.best) return "";
  const metric = exp.objective.metric;
  return `${metric} = ${numberText(exp.best.objective)}`;
}

export function katibList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Katib experiments"),
    h("table", { id: "katib-experiments" },
      h("thead", {}, h("tr", {}, ["Name", "Namespace", "Status", "Succeeded", "Running", "Failed", "Best trial", "Objective",
        "Algorithm", "Age"].map((t) => h("th", {}, t)))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const rows = (await getJSON(namespacedList(EXPERIMENTS))).experiments || [];
    if (token !== routeToken) return;
    fill(body, rows.map((exp) => {
      const href = `#/katib/${objectPath(exp.namespace, exp.name)}`;
      return h("tr", { className: "run-row katib-row", "data-experiment": `${exp.namespace}/${exp.name}`, onclick: () => { location.hash = href; } },
        h("td", {}, h("a", { href }, exp.name)), h("td", {}, exp.namespace), h("td", { className: "wrap" }, badge(exp.condition)),
        h("td", { className: "num katib-succeeded" }, String(exp.counts.trialsSucceeded)),
        h("td", { className: "num katib-running" }, String(exp.counts.trialsRunning)),
        h("td", { className: "num katib-failed" }, String(exp.counts.trialsFailed)),
        h("td", { className: "katib-best" }, exp.best ? exp.best.name : ""),
        h("td", { className: "katib-objective" }, bestText(exp)),
        h("td", {}, exp.algorithm), h("td", { title: fmtTime(exp.created) }, duration(exp.created)));
    }));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 10, className: "muted" }, "No Katib experiments. Create one with kubectl apply -f or KatibClient().tune(...).")));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}

// --- the plot: one scatter per parameter, x the parameter's value, y the objective ---

const PLOT = { W: 260, H: 200, L: 52, R: 10, T: 10, B: 34 };

function niceRange(values) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  return [lo, hi];
}

// Where each trial sits on one parameter's axis: numbers on a linear scale (the feasible space's when known),
// categories and discrete values at evenly spaced positions in the order the search space lists them.
function axisOf(param, trials) {
  const raw = trials.map((t) => t.parameters[param.name]);
  const numeric = ["double", "int"].includes(param.type) && raw.every((v) => !isNaN(Number(v)));
  if (numeric) {
    const nums = raw.map(Number);
    const [lo, hi] = param.min !== null && param.max !== null && param.min < param.max ? [param.min, param.max] : niceRange(nums);
    return { kind: "number", lo, hi, pos: (v) => (Number(v) - lo) / (hi - lo), ticks: [lo, (lo + hi) / 2, hi].map((v) => [(v - lo) / (hi - lo), numberText(v)]) };
  }
  const cats = [...new Set([...param.list, ...raw.filter((v) => v !== undefined)])];
  const step = 1 / Math.max(1, cats.length);
  const pos = (v) => (cats.indexOf(v) + 0.5) * step;
  return { kind: "category", pos, ticks: cats.map((c) => [pos(c), c]) };
}

function scatter(param, trials, objective, bestName) {
  const { W, H, L, R, T, B } = PLOT;
  const points = trials.filter((t) => t.objective !== null && t.parameters[param.name] !== undefined);
  const axis = axisOf(param, points);
  const [low, high] = niceRange(points.map((t) => t.objective));
  const pad = (high - low) * 0.06;  // the highest and lowest points clear of the frame
  const [lo, hi] = [low - pad, high + pad];
  const x = (f) => L + f * (W - L - R);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  return s("svg", { class: "katib-scatter", "data-parameter": param.name, width: W, height: H, viewBox: `0 0 ${W} ${H}` },
    s("title", {}, `${objective.metric} against ${param.name}`),
    s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de" }),
    axis.ticks.map(([f, label]) => s("text", { x: x(f), y: H - B + 13, "text-anchor": "middle", "font-size": 10 }, label)),
    [low, (low + high) / 2, high].map((v) => s("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end", "font-size": 10 }, numberText(v))),
    s("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", "font-size": 11, class: "katib-axis" }, param.name),
    s("text", { x: 10, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 11, transform: `rotate(-90 10 ${(T + H - B) / 2})` }, objective.metric),
    points.map((t) => s("circle", { class: t.name === bestName ? "katib-point best" : "katib-point", "data-trial": t.name,
      "data-value": t.parameters[param.name], "data-objective": t.objective,
      cx: x(axis.pos(t.parameters[param.name])).toFixed(1), cy: y(t.objective).toFixed(1), r: t.name === bestName ? 6 : 4,
      fill: t.name === bestName ? "#cf222e" : "#1f6feb", "fill-opacity": 0.75 },
    s("title", {}, `${t.name}: ${param.name}=${t.parameters[param.name]}, ${objective.metric}=${numberText(t.objective)}`))));
}

function plots(exp) {
  const withValue = exp.trials.filter((t) => t.objective !== null);
  if (!withValue.length) return h("p", { className: "muted", id: "katib-plot-empty" }, "No trial has reported the objective yet.");
  const bestName = exp.best ? exp.best.name : "";
  return h("div", { className: "katib-plots" }, exp.parameters.map((p) => scatter(p, withValue, exp.objective, bestName)));
}

// --- a trial's log: its primary pod (Katib's trial label), the primary container's log ---

async function trialLog(namespace, trial) {
  const selector = encodeURIComponent(`${TRIAL_LABEL}=${trial.name}`);
  const pods = ((await getJSON(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods?labelSelector=${selector}`)).items || [])
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  if (!pods.length) {
    return TRIAL_FINAL.has(trial.condition.type)
      ? `No pod of trial ${trial.name}: its job was deleted when it ended (the trial template's retain is false).`
      : `No pod of trial ${trial.name} yet.`;
  }
  // the primary pod (Katib's primaryPodLabels: a PyTorchJob's master, a TrainJob's node 0), else the first
  const primary = Object.entries(trial.primaryPodLabels || {});
  const pod = pods.find((p) => primary.every(([k, v]) => (p.metadata.labels || {})[k] === v)) || pods[0];
  const containers = ((pod.spec || {}).containers || []).map((c) => c.name);
  // no primary named: the template's first (the metrics collector sidecar, when injected, comes after it)
  const chosen = containers.includes(trial.primaryContainer) ? trial.primaryContainer : containers[0];
  const container = chosen ? `&container=${encodeURIComponent(chosen)}` : "";
  return getText(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod.metadata.name)}/log?tailLines=${LOG_LINES}${container}`);
}

function kvRows(pairs) {
  return pairs.flatMap(([k, v]) => [h("div", {}, k), h("div", { className: "wrap" }, v)]);
}

export function katibDetail(main, namespace, name) {
  const view = { trial: "", finalSeen: false, trials: [] };
  const header = h("div", { id: "katib-header" });
  const plotBox = h("div", { id: "katib-plot" });
  const table = h("table", { id: "katib-trials" });
  const chooser = h("select", { id: "katib-trial", onchange: () => { view.trial = chooser.value; refreshLog(); } });
  const log = h("pre", { className: "log", id: "katib-trial-log" });
  main.append(header, h("h2", {}, "Parameters against the objective"), plotBox, h("h2", {}, "Trials"), table,
    h("h2", {}, "Trial log"), h("div", { className: "toolbar" }, h("label", { for: "katib-trial" }, "Trial"), chooser), log);

  async function refreshLog() {
    const token = routeToken;
    const trial = view.trials.find((t) => t.name === view.trial);
    if (!trial) { log.textContent = ""; return; }
    let logText;
    try {
      logText = await trialLog(namespace, trial);
    } catch (err) {
      logText = `${trial.name}: ${err.message}`;
    }
    if (token !== routeToken || log.textContent === logText) return;
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = logText;
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  function showTrial(trialName) {
    view.trial = trialName;
    chooser.value = trialName;
    refreshLog();
  }

  const stop = every(REFRESH_MS, async () => {
    const token = routeToken;
    let exp;
    try {
      exp = await getJSON(`${EXPERIMENTS}/${objectPath(namespace, name)}`);
    } catch (err) {
      if (token === routeToken) {
        fill(header, h("h1", {}, h("a", { href: "#/katib" }, "Katib experiments"), " / ", name),
          h("div", { className: "error", id: "katib-error" }, `${namespace}/${name}: ${err.message}`));
        stop();
      }
      return;
    }
    if (token !== routeToken) return;
    view.trials = exp.trials;
    const objective = exp.objective;
    const best = exp.best;
    fill(header,
      h("h1", {}, h("a", { href: "#/katib" }, "Katib experiments"), " / ", exp.name, " ", badge(exp.condition)),
      h("div", { className: "kv", id: "katib-summary" }, kvRows([
        ["Namespace", exp.namespace],
        ["Status", `${exp.condition.type}${exp.condition.reason ? ` (${exp.condition.reason})` : ""}${exp.condition.message ? `: ${exp.condition.message}` : ""}`],
        ["Objective", `${objective.type} ${objective.metric}${objective.goal !== null ? `, goal ${numberText(objective.goal)}` : ""}`],
        ["Algorithm", exp.algorithm],
        ["Trials", `${exp.counts.trials} (${exp.counts.trialsSucceeded} succeeded, ${exp.counts.trialsRunning} running, `
          + `${exp.counts.trialsFailed} failed${exp.counts.trialsEarlyStopped ? `, ${exp.counts.trialsEarlyStopped} early stopped` : ""}) `
          + `of at most ${exp.maxTrialCount ?? "unlimited"}, ${exp.parallelTrialCount ?? 1} at a time`],
        ["Best trial", best ? h("span", { id: "katib-best" }, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); showTrial(best.name); } }, best.name),
          ` ${objective.metric} = ${numberText(best.objective)}; `,
          Object.entries(best.parameters).map(([k, v]) => `${k}=${v}`).join(", ")) : "none yet"],
        ["Created", fmtTime(exp.created)],
      ])));
    fill(plotBox, plots(exp));
    const params = exp.parameters.map((p) => p.name);
    const others = exp.metricNames.slice(1);
    fill(table,
      h("thead", {}, h("tr", {}, h("th", {}, "Trial"), h("th", {}, "Status"), params.map((p) => h("th", {}, p)),
        h("th", {}, objective.metric), others.map((m) => h("th", {}, m)), h("th", {}, "Duration"))),
      h("tbody", {}, exp.trials.map((t) => h("tr", { className: `run-row katib-trial-row${best && best.name === t.name ? " best" : ""}`, "data-trial": t.name,
        onclick: () => showTrial(t.name) },
      h("td", {}, t.name), h("td", { className: "wrap" }, badge(t.condition)),
      params.map((p) => h("td", { className: "katib-param", "data-parameter": p }, t.parameters[p] ?? "")),
      h("td", { className: "num katib-trial-objective" }, numberText(t.objective)),
      others.map((m) => h("td", { className: "num" }, numberText(t.metrics[m]))),
      h("td", {}, duration(t.started, t.completed || null))))));
    if (!exp.trials.length) table.append(h("tbody", {}, h("tr", {}, h("td", { colspan: 4 + params.length + others.length, className: "muted" }, "No trial yet."))));
    const names = exp.trials.map((t) => t.name);
    if (chooser.options.length !== names.length) {
      fill(chooser, names.map((n) => h("option", { value: n }, n)));
      if (!names.includes(view.trial)) view.trial = best ? best.name : names[0] || "";
      chooser.value = view.trial;
    }
    await refreshLog();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
    if (FINAL.has(exp.condition.type)) {
      if (view.finalSeen) stop();  // one more round after the end: the last trial's last lines
      view.finalSeen = true;
    }
  });
}
