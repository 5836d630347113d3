// The controls of a paged list read from a KFP-style API (page_size, page_token, sort_by): headers that sort by
// their column (a click sorts descending, the next ascending, with an arrow), and a pager (previous, next, "1–20 of N").
// The Artifacts and Executions pages share them; view holds {sort, pageSize, tokens, index}.

import { h } from "./dom.js";

// A header per [field, label], id `${prefix}-sort-${field}`; arrows() marks the one sorted by.
export function sortHeaders(prefix, columns, view, restart) {
  const headers = new Map(columns.map(([field, label]) => [field, h("th", { className: "sortable", id: `${prefix}-sort-${field}`,
    onclick: () => { view.sort = view.sort === `${field} desc` ? field : `${field} desc`; restart(); } }, label)]));
  const arrows = () => {
    for (const [field, label] of columns) {
      headers.get(field).textContent = label + (view.sort === field ? " ▲" : view.sort === `${field} desc` ? " ▼" : "");
    }
  };
  return { headers, arrows };
}

// Previous / next buttons and the rows shown of the total; shown(page, count) after each load.
export function pager(prefix, view, load) {
  const prev = h("button", { id: `${prefix}-prev-page`, onclick: () => { view.index -= 1; load(); } }, "‹ Previous");
  const next = h("button", { id: `${prefix}-next-page`, onclick: () => { view.index += 1; load(); } }, "Next ›");
  const info = h("span", { id: `${prefix}-page-info` });
  const shown = (page, count) => {
    view.tokens[view.index + 1] = page.next_page_token || "";
    const first = view.index * view.pageSize;
    info.textContent = `${count ? first + 1 : 0}–${first + count} of ${page.total_size ?? "?"}`;
    prev.disabled = view.index === 0;
    next.disabled = !page.next_page_token;
  };
  return { el: h("div", { className: "pager" }, prev, next, info), shown };
}

// The query of the page view shows: its size, sort and token, and the filter's predicates (none: no filter).
export function pageQuery(view, predicates) {
  const params = new URLSearchParams({ page_size: view.pageSize, sort_by: view.sort, page_token: view.tokens[view.index] || "" });
  if (predicates.length) params.set("filter", JSON.stringify({ predicates }));
  return params;
}
