// Values as the pages show them: times, durations, sizes, counts, parameter values, kfp 1.x metrics and
// schedules. Pure functions of their arguments (fmtTime and duration also read the clock and locale).

export function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

// From start to end (or to now, while it runs): 42s, 3m 5s, 2h 7m.
export function duration(start, end) {
  if (!start) return "";
  const ms = (end ? new Date(end) : new Date()) - new Date(start);
  if (!(ms >= 0)) return "";
  const sec = Math.round(ms / 1000);
  if (sec < 60) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min}m ${sec % 60}s`;
  return `${Math.floor(min / 60)}h ${min % 60}m`;
}

// Text for a field that may be missing: null and undefined (and NaN) are "", never "null" or "undefined".
// h() already leaves out null and undefined children; this is for text built from values (templates, joins).
export function text(value) {
  if (value === null || value === undefined || (typeof value === "number" && Number.isNaN(value))) return "";
  return String(value);
}

// A parameter or output value: a string as itself, a missing one as "", anything else as JSON.
export function valueText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

export function fmtBytes(value) {
  if (value === null || value === undefined) return "n/a";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(value), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function fmtCount(value) {
  return value === null || value === undefined ? "n/a" : String(Math.round(Number(value) * 100) / 100);
}

// One metric's value (kfp 1.x mlpipeline-metrics, or a v2 Metrics artifact's scalar): three decimals, or a
// percentage; "" when it has none.
export function v1Number(metric) {
  if (!metric || metric.number_value === null || metric.number_value === undefined) return "";
  const value = Number(metric.number_value);
  if (Number.isNaN(value)) return text(metric.number_value);
  return metric.format === "PERCENTAGE" ? `${(value * 100).toFixed(3)}%` : value.toFixed(3);
}

// A run's metrics (kfp 1.x, then v2 scalar metrics) on one line of the runs list: the first six.
export function metricsText(metrics) {
  if (!metrics || !metrics.length) return "";
  return metrics.slice(0, 6).map((m) => `${m.name}: ${v1Number(m)}`).join(" · ") + (metrics.length > 6 ? " …" : "");
}

// A recurring run's trigger: cron or period.
export function triggerText(trigger) {
  const cron = (trigger || {}).cron_schedule;
  const periodic = (trigger || {}).periodic_schedule;
  if (cron) return `cron ${cron.cron}`;
  if (periodic) return `every ${periodic.interval_second}s`;
  return "";
}
