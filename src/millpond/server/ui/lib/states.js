// A KFP run's and task's states: the final ones (nothing changes after), and the filter's choices.

export const FINAL = new Set(["SUCCEEDED", "FAILED", "SKIPPED", "CANCELED"]);
export const STATES = ["RUNNING", "PENDING", "SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"];
