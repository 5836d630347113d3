// millpond's web UI: native ES modules, no build step. This module maps each hash route to its page
// (one module per page under pages/, shared pieces under lib/) and starts the router.
//   #/runs                  runs list (state filter, sort, paging, auto-refresh)          pages/runs.js
//   #/archive/runs          archived runs (KFP's Archive view)                             pages/runs.js
//   #/runs/ID               run detail: the DAG as a graph, a task's inputs, outputs and log;
//                           terminate, retry, clone, archive / restore, delete              pages/run-detail.js
//   #/runs/ID/clone         the run form, filled in from run ID (pipeline, parameters)     pages/clone.js
//   #/compare/A,B           runs side by side: state, parameters, kfp v1 metrics          pages/compare.js
//   #/experiments           experiments list                                               pages/experiments.js
//   #/experiments/ID[/archive]  the runs of one experiment (its archived runs)             pages/runs.js
//   #/pipelines             pipelines list, upload a pipeline YAML                         pages/pipelines.js
//   #/pipelines/ID[/VER]    a pipeline's versions, and a form that starts a run of one    pages/pipelines.js
// The links kfp.Client prints (#/runs/details/ID, #/experiments/details/ID, #/pipelines/details/ID
// and #/pipelines/details/ID/version/VER) open the same pages (lib/router.js folds them).
//   #/recurring             recurring runs: trigger, concurrency, enable / disable        pages/recurring.js
//   #/datasets              datasets (millpond's Fluid routes) with their cache percentage pages/datasets.js
//   #/jobs                  training jobs (arena submit, TrainingClient, manifests)        pages/jobs.js
//   #/jobs/NAMESPACE/NAME   a job: its instances, events, and an instance's log            pages/jobs.js
//   #/queues                Kueue's ClusterQueues, LocalQueues, quota, pending workloads  pages/queues.js
//   #/models                KServe InferenceServices: readiness, traffic, requests         pages/models.js
//   #/models/NAMESPACE/NAME one InferenceService: conditions, revisions, sample requests  pages/models.js
//   #/registry              the model registry: registered models, versions, state, URI     pages/registry.js
//   #/artifacts             artifacts (KFP's Artifacts list): type, URI, run, producer     pages/artifacts.js
//   #/artifacts/ID[/lineage]  an artifact: overview and metadata; its Lineage Explorer      pages/artifact-detail.js
//   #/artifacts/by-uri/URI  the artifact of that URI (the run page's artifact nodes link) pages/artifact-detail.js
//   #/executions            executions (KFP's Executions list): state, type, run          pages/executions.js
//   #/executions/ID         an execution: declared and actual inputs and outputs           pages/execution-detail.js
//   #/katib                 Katib's Experiments: status, trial counts, best trial           pages/katib.js
//   #/katib/NAMESPACE/NAME  an Experiment: parameters against the objective, trials, a trial's log
//                           (Katib's #/katib/hp_monitor/NAMESPACE/NAME, which its SDK prints, too) pages/katib.js
//   #/notebooks             Kubeflow Notebooks: status, resources; Connect, Stop/Start, Delete pages/notebooks.js
//   #/notebooks/new         the spawner form (JWA's fields), errors beside their fields       pages/notebooks.js
//   #/nodes                 this machine (or the Ray cluster's nodes) as live charts       pages/nodes.js
//   #/contributors          multi-user: Manage contributors of the namespaces one owns     pages/contributors.js
// A multi-user server (millpond server --multi-user) first shows the login page (lib/login.js) until whoami
// names a user; the header then gets the namespace selector, the user's name and logout (lib/account.js),
// and the lists show the chosen namespace (lib/namespace.js). Single-user: none of that, as before.

import { drawAccount } from "./lib/account.js";
import { h } from "./lib/dom.js";
import { showLogin } from "./lib/login.js";
import { currentNamespace, loadNamespaces } from "./lib/namespace.js";
import { start } from "./lib/router.js";
import { loadSession, session } from "./lib/session.js";
import { artifactByUri, artifactDetail } from "./pages/artifact-detail.js";
import { artifactsList } from "./pages/artifacts.js";
import { cloneRun } from "./pages/clone.js";
import { compareRuns } from "./pages/compare.js";
import { contributorsPage } from "./pages/contributors.js";
import { datasetsList } from "./pages/datasets.js";
import { executionDetail } from "./pages/execution-detail.js";
import { executionsList } from "./pages/executions.js";
import { experimentsList } from "./pages/experiments.js";
import { jobDetail, jobsList } from "./pages/jobs.js";
import { katibDetail, katibList } from "./pages/katib.js";
import { modelDetail, modelsList } from "./pages/models.js";
import { nodesPage } from "./pages/nodes.js";
import { notebookForm, notebooksList } from "./pages/notebooks.js";
import { pipelineDetail, pipelinesList } from "./pages/pipelines.js";
import { queuesList } from "./pages/queues.js";
import { recurringList } from "./pages/recurring.js";
import { registryPage } from "./pages/registry.js";
import { runDetail } from "./pages/run-detail.js";
import { runsList } from "./pages/runs.js";

// The page for a hash's segments (lib/router.js's routeParts), drawn into main; anything else is the runs list.
function showPage(parts, main) {
  const [first, second, third] = parts;
  if (first === "runs" && second && third === "clone") return cloneRun(main, second);
  if (first === "runs" && second) return runDetail(main, second);
  if (first === "archive") return runsList(main, null, true);
  if (first === "compare" && second) return compareRuns(main, second.split(",").filter(Boolean).slice(0, 10));
  if (first === "experiments" && second) return runsList(main, second, third === "archive");
  if (first === "experiments") return experimentsList(main);
  if (first === "pipelines" && second) return pipelineDetail(main, second, third);
  if (first === "pipelines") return pipelinesList(main);
  if (first === "recurring") return recurringList(main);
  if (first === "datasets") return datasetsList(main);
  if (first === "jobs" && second && third) return jobDetail(main, second, third);
  if (first === "jobs") return jobsList(main);
  if (first === "queues") return queuesList(main);
  if (first === "katib") return katibPage(parts.slice(second === "hp_monitor" ? 2 : 1), main);
  if (first === "nodes") return nodesPage(main);
  if (first === "notebooks" && second === "new") return notebookForm(main);
  if (first === "notebooks") return notebooksList(main);
  if (first === "models" && second && third) return modelDetail(main, second, third);
  if (first === "models") return modelsList(main);
  if (first === "registry") return registryPage(main);
  if (first === "artifacts" && second === "by-uri" && third) return artifactByUri(main, third);
  if (first === "artifacts" && second) return artifactDetail(main, second, third);
  if (first === "artifacts") return artifactsList(main);
  if (first === "executions" && second) return executionDetail(main, second);
  if (first === "executions") return executionsList(main);
  return runsList(main, null);
}

// #/katib[/NAMESPACE/NAME]: the experiments, or one of them.
function katibPage([namespace, name], main) {
  return namespace && name ? katibDetail(main, namespace, name) : katibList(main);
}

// A multi-user page when the user has no namespace yet: say how to get one (Manage contributors still opens).
function showPageOrNote(parts, main) {
  if (session.multiUser && !currentNamespace() && parts[0] !== "contributors") {
    main.append(h("h1", {}, "No namespace yet"), h("p", { id: "no-namespace", className: "muted" },
      `${session.user} has no namespace: an administrator creates a profile for you (millpond profile create), `
      + "or a namespace's owner adds you as a contributor."));
    return undefined;
  }
  if (parts[0] === "contributors") return contributorsPage(main);
  return showPage(parts, main);
}

// Who is this (whoami), then the login page or the app; a module runs once the page is parsed (header, #main exist).
async function boot() {
  await loadSession();
  if (!session.multiUser) { start(showPage); return; }
  if (!session.user) { showLogin(); return; }
  try {
    await loadNamespaces();
  } catch (err) {
    document.getElementById("status").textContent = `namespaces: ${err.message}`;
  }
  drawAccount();
  start(showPageOrNote);
}

boot();
