// Polling that belongs to one page: every route change bumps routeToken and clears the timers, so a
// page's polls stop and the late answers of an old page are dropped (each poll compares the token it
// started with to routeToken, a live binding, before it touches the page).

import { setStatus } from "./dom.js";

export const REFRESH_MS = 3000;  // the lists; a run's graph and a log are followed faster
export let routeToken = 0;
let timers = [];

export function clearTimers() {
  for (const t of timers) clearTimeout(t);
  timers = [];
}

// A new page (a route change, or the token form taking the page): older polls stop.
export function nextRoute() {
  routeToken += 1;
  clearTimers();
}

// Calls fn now and again ms after each call ends, until the route changes or the returned stop() is called;
// a failing call shows its error in the status line and the polling goes on.
export function every(ms, fn) {
  const token = routeToken;
  let stopped = false;
  const tick = async () => {
    if (stopped || token !== routeToken) return;
    try { await fn(); } catch (err) { setStatus(err.message, true); }
    if (!stopped && token === routeToken) timers.push(setTimeout(tick, ms));
  };
  tick();
  return () => { stopped = true; };
}
