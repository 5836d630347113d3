// The form that starts a run (a pipeline version's, or a clone of a run): its name, experiment and the
// pipeline's parameters as typed inputs. Shared by the pipeline page and the clone page.

import { API, postJSON } from "../lib/api.js";
import { h } from "../lib/dom.js";
import { currentNamespace } from "../lib/namespace.js";

const PARAM_TYPES = { STRING: "string", NUMBER_INTEGER: "integer", NUMBER_DOUBLE: "float", BOOLEAN: "boolean",
  LIST: "list (JSON)", STRUCT: "dict (JSON)" };

// A kfp 1.x upload's (or run's) pipeline_spec is its Argo workflow, as Kubeflow returns it.
function isWorkflow(spec) {
  return Boolean(spec) && spec.kind === "Workflow" && String(spec.apiVersion || "").startsWith("argoproj.io/");
}

// The IR (its root's parameters are what the form asks) of a pipeline version or a run.
export function irOf(version) {
  const spec = version.pipeline_spec || {};
  if (isWorkflow(spec)) {  // the workflow's parameters: strings, with their defaults (no value: required)
    const parameters = {};
    for (const p of ((spec.spec || {}).arguments || {}).parameters || []) {
      if (!p || typeof p.name !== "string") continue;
      parameters[p.name] = { parameterType: "STRING", ...(p.value === undefined || p.value === null ? {} : { defaultValue: String(p.value) }) };
    }
    return { root: { inputDefinitions: { parameters } } };
  }
  return spec.pipeline_spec && spec.pipeline_spec.root ? spec.pipeline_spec : spec;
}

function paramInput(key, def) {
  const type = def.parameterType || "STRING";
  const has = def.defaultValue !== undefined && def.defaultValue !== null;
  const attrs = { name: `param-${key}`, "data-param": key, "data-type": type, id: `param-${key}` };
  if (type === "BOOLEAN") return h("input", { ...attrs, type: "checkbox", checked: has && def.defaultValue === true });
  if (type === "NUMBER_INTEGER" || type === "NUMBER_DOUBLE") {
    return h("input", { ...attrs, type: "number", step: type === "NUMBER_INTEGER" ? "1" : "any", value: has ? def.defaultValue : "",
      required: !has && !def.isOptional });
  }
  if (type === "LIST" || type === "STRUCT") {
    const el = h("textarea", { ...attrs, rows: 2, cols: 34, placeholder: type === "LIST" ? "[...]" : "{...}" });
    el.value = has ? JSON.stringify(def.defaultValue) : "";
    return el;
  }
  return h("input", { ...attrs, type: "text", size: 34, value: has ? def.defaultValue : "", required: !has && !def.isOptional });
}

// An input's value as its parameter's type (undefined when empty: the default applies); bad input throws its one line.
function paramValue(el) {
  const type = el.dataset.type;
  if (type === "BOOLEAN") return el.checked;
  if (el.value === "") return undefined;
  if (type === "NUMBER_INTEGER") {
    const n = Number(el.value);
    if (!Number.isInteger(n)) throw new Error(`${el.dataset.param}: an integer, please`);
    return n;
  }
  if (type === "NUMBER_DOUBLE") return Number(el.value);
  if (type === "LIST" || type === "STRUCT") {
    let value;
    try { value = JSON.parse(el.value); } catch (err) { throw new Error(`${el.dataset.param}: not JSON (${err.message})`, { cause: err }); }
    if (type === "LIST" ? !Array.isArray(value) : (typeof value !== "object" || value === null || Array.isArray(value))) {
      throw new Error(`${el.dataset.param}: a JSON ${type === "LIST" ? "list" : "object"}, please`);
    }
    return value;
  }
  return el.value;
}

// Multi-user: a run needs an experiment of its namespace; "(default)" is the namespace's "Default" one, made when
// missing, as kfp.Client does.
async function defaultExperiment(experiments, namespace) {
  const found = experiments.find((e) => e.display_name === "Default");
  if (found) return found.experiment_id;
  return (await postJSON(`${API}/experiments`, { display_name: "Default", namespace })).experiment_id;
}

// The form of a run of a pipeline version.
export function runForm(pipeline, version, experiments) {
  return runFormFor({
    heading: ["Start a run of ", version.display_name || version.name],
    ir: irOf(version),
    runName: `${pipeline.display_name || pipeline.name} ${new Date().toISOString().slice(0, 19).replace("T", " ")}`,
    fallbackName: pipeline.name,
    experiments,
    target: { pipeline_version_reference: { pipeline_id: version.pipeline_id, pipeline_version_id: version.pipeline_version_id } },
  });
}

// The form that starts a run: its name, experiment and the pipeline's parameters (typed inputs,
// filled with opts.values, else the defaults); opts.target says what to run (a pipeline version or an IR).
export function runFormFor(opts) {
  const params = ((opts.ir.root || {}).inputDefinitions || {}).parameters || {};
  const values = opts.values || {};
  const name = h("input", { type: "text", id: "run-name", size: 34, value: opts.runName });
  const experiment = h("select", { id: "run-experiment" }, h("option", { value: "" }, "(default)"),
    opts.experiments.map((e) => h("option", { value: e.experiment_id, selected: e.experiment_id === opts.experimentId },
      e.display_name)));
  const inputs = Object.entries(params).map(([key, def]) =>
    [key, def, paramInput(key, Object.hasOwn(values, key) ? { ...def, defaultValue: values[key] } : def)]);
  const message = h("div", { id: "run-message", className: "error" });
  const submit = h("button", { type: "submit", id: "create-run" }, "Start run");
  const form = h("form", { id: "run-form", className: "panel", onsubmit: async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    const parameters = {};
    try {
      for (const [key, , el] of inputs) {
        const value = paramValue(el);
        if (value !== undefined) parameters[key] = value;
      }
    } catch (err) { message.textContent = err.message; return; }
    const body = { display_name: name.value.trim() || opts.fallbackName, ...opts.target,
      runtime_config: { ...(opts.runtimeConfig || {}), parameters } };
    submit.disabled = true;
    try {
      if (experiment.value) body.experiment_id = experiment.value;
      else if (currentNamespace()) body.experiment_id = await defaultExperiment(opts.experiments, currentNamespace());
      const run = await postJSON(`${API}/runs`, body);
      location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
    } catch (err) {
      message.textContent = err.message;
      submit.disabled = false;
    }
  } },
  h("h1", {}, opts.heading),
  opts.note ? h("p", { className: "muted" }, opts.note) : null,
  h("div", { className: "kv form" },
    h("div", {}, "Run name"), h("div", {}, name),
    h("div", {}, "Experiment"), h("div", {}, experiment),
    inputs.map(([key, def, el]) => [
      h("div", {}, h("label", { for: el.id }, key)),
      h("div", {}, el, " ", h("span", { className: "muted" }, PARAM_TYPES[def.parameterType] || def.parameterType,
        def.isOptional || def.defaultValue !== undefined ? "" : ", required"))])),
  inputs.length ? null : h("p", { className: "muted" }, "This pipeline takes no parameters."),
  h("p", {}, submit), message);
  return form;
}
