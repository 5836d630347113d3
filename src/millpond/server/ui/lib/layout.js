// Where each task of a DAG goes: a row per depth (the longest chain of dependencies above it, inside
// its DAG), each row ordered by the mean position of its parents (fewer crossings), rows centred.
// Pure: nodes in ({path, deps}), positions out; the drawing is dag.js.

export const NODE_W = 190, NODE_H = 46, GAP_X = 34, GAP_Y = 46, PAD = 20;

// {pos: Map(path → {x, y}), width, height} of nodes [{path, deps: [path…]}]; a dependency outside nodes is ignored.
export function layout(nodes) {
  const byPath = new Map(nodes.map((n) => [n.path, n]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (n) => {
    if (depth.has(n.path)) return depth.get(n.path);
    if (visiting.has(n.path)) return 0;  // a cycle: should not happen in a pipeline
    visiting.add(n.path);
    let d = 0;
    for (const dep of n.deps || []) if (byPath.has(dep)) d = Math.max(d, depthOf(byPath.get(dep)) + 1);
    visiting.delete(n.path);
    depth.set(n.path, d);
    return d;
  };
  const rows = [];
  for (const n of nodes) (rows[depthOf(n)] ||= []).push(n);
  const x = new Map();
  rows.forEach((row, r) => {
    if (r > 0) {  // order by the mean position of the parents (fewer crossings)
      const key = (n) => {
        const xs = (n.deps || []).filter((d) => x.has(d)).map((d) => x.get(d));
        return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Infinity;
      };
      row.sort((a, b) => key(a) - key(b));
    }
    row.forEach((n, i) => x.set(n.path, i));
  });
  const width = Math.max(1, ...rows.map((row) => (row || []).length));
  const pos = new Map();
  rows.forEach((row, r) => {
    const offset = (width - row.length) * (NODE_W + GAP_X) / 2;
    row.forEach((n, i) => pos.set(n.path, { x: PAD + offset + i * (NODE_W + GAP_X), y: PAD + r * (NODE_H + GAP_Y) }));
  });
  return { pos, width: PAD * 2 + width * (NODE_W + GAP_X) - GAP_X, height: PAD * 2 + rows.length * (NODE_H + GAP_Y) - GAP_Y };
}
