// Experiments' names by id, shared by the pages that show a run's or recurring run's experiment
// (the runs list, recurring runs, a run's header): asked for once, then kept for the session.

import { API, getJSON } from "./api.js";
import { scoped } from "./namespace.js";

export const experimentNames = new Map();

// Every experiment's name (all pages of the list).
export async function loadExperimentNames() {
  let token = "";
  do {
    const page = await getJSON(scoped(`${API}/experiments?page_size=1000&page_token=${encodeURIComponent(token)}`));
    for (const e of page.experiments || []) experimentNames.set(e.experiment_id, e.display_name);
    token = page.next_page_token || "";
  } while (token);
}

// True when a row names an experiment whose name is not known yet.
export function namesMissing(rows) {
  return rows.some((r) => r.experiment_id && !experimentNames.has(r.experiment_id));
}
