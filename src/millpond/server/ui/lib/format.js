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

// A parameter or output value: a string as itself, anything else as JSON.
export function valueText(value) {
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

// One kfp 1.x metric's value (mlpipeline-metrics): three decimals, or a percentage.
export function v1Number(metric) {
  const value = Number(metric.number_value);
  return metric.format === "PERCENTAGE" ? `${(value * 100).toFixed(3)}%` : value.toFixed(3);
}

// A run's kfp 1.x metrics on one line of the runs list: the first six.
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
