// Minimal Markdown, built as DOM nodes (text nodes only: the artifact's HTML is never parsed):
// headings, paragraphs, lists, code blocks, pipe tables, **bold**, *em*, `code`, [links](http...).

import { h } from "./dom.js";

const LIST_ITEM = /^\s*([-*+]|\d+[.)])\s+/;

export function renderMarkdown(text) {
  const root = h("div", { className: "markdown" });
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*```/.test(line)) {
      const code = [];
      for (i += 1; i < lines.length && !/^\s*```/.test(lines[i]); i += 1) code.push(lines[i]);
      i += 1;
      root.append(h("pre", {}, h("code", {}, code.join("\n"))));
    } else if (/^#{1,6}\s/.test(line)) {
      const level = line.match(/^#+/)[0].length;
      root.append(h(`h${Math.min(6, level + 2)}`, {}, inline(line.replace(/^#+\s*/, ""))));
      i += 1;
    } else if (LIST_ITEM.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul");
      for (; i < lines.length && LIST_ITEM.test(lines[i]); i += 1) {
        list.append(h("li", {}, inline(lines[i].replace(LIST_ITEM, ""))));
      }
      root.append(list);
    } else if (/^\s*\|/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-+/.test(lines[i + 1])) {
      const cells = (l) => l.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());
      const head = cells(line);
      const rows = [];
      for (i += 2; i < lines.length && /^\s*\|/.test(lines[i]); i += 1) rows.push(cells(lines[i]));
      root.append(h("table", {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
        h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, inline(c))))))));
    } else if (!line.trim()) {
      i += 1;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*([-*+]|\d+[.)])\s+|\s*\|)/.test(lines[i]); i += 1) {
        para.push(lines[i]);
      }
      if (!para.length) { para.push(line); i += 1; }
      root.append(h("p", {}, inline(para.join(" "))));
    }
  }
  return root;
}

// `code`, **bold**, *em* and [text](url) inside a line; a link only to http(s), opened in a new tab.
export function inline(text) {
  const out = [];
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(h("code", {}, m[1]));
    else if (m[2] !== undefined) out.push(h("strong", {}, m[2]));
    else if (m[3] !== undefined) out.push(h("em", {}, m[3]));
    else if (/^https?:\/\//i.test(m[5])) out.push(h("a", { href: m[5], target: "_blank", rel: "noopener noreferrer" }, m[4]));
    else out.push(m[4]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
