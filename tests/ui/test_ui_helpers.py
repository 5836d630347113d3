"""The web UI's pure helpers, unit-tested in Debian's Chromium: each test imports the ES module the
page imports (``await import('/ui/lib/….js')``, served by ``millpond server`` under the page's
Content-Security-Policy) and checks what it returns through Playwright's ``page.evaluate``.

Graph layout (rows by dependency depth, parents' order, size), Markdown (built as elements and text,
never as HTML), formatting (durations, sizes, metrics, schedules), the router's folding of the links
kfp.Client prints, and h() (attributes, listeners, text).
"""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.server_support import Served, module_home, serving
from tests.ui.test_server_ui import chromium_page


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "ui-helpers"):
        yield from serving()


@pytest.fixture(scope="module")
def page(server: Served) -> Iterator[Any]:
    """One page of the UI for the module: the helpers are imported as the app imports them (same origin, same CSP)."""
    with chromium_page() as (ui_page, errors):
        ui_page.goto(server.url + "/#/nodes")
        ui_page.locator("#nodes").wait_for(timeout=10_000)
        yield ui_page
        assert not errors, errors


def run(page: Any, module: str, body: str, arg: Any = None) -> Any:
    """body (a function of the module's exports ``m`` and ``arg``) evaluated in the page, its result as JSON."""
    script = f"async (arg) => {{ const m = await import('/ui/lib/{module}'); return ({body})(m, arg); }}"
    return page.evaluate(script, arg)


LAYOUT = ("(m, nodes) => { const r = m.layout(nodes); "
          "return {pos: Object.fromEntries(r.pos), width: r.width, height: r.height, "
          "size: [m.NODE_W, m.NODE_H, m.GAP_X, m.GAP_Y, m.PAD]}; }")


def test_layout_puts_each_task_one_row_below_its_deepest_dependency(page: Any) -> None:
    nodes = [{"path": "c", "deps": ["a", "b"]}, {"path": "a", "deps": []}, {"path": "b", "deps": ["a"]},
             {"path": "d", "deps": ["a"]}]
    got = run(page, "layout.js", LAYOUT, nodes)
    node_w, node_h, gap_x, gap_y, pad = got["size"]
    rows = {path: (p["y"] - pad) / (node_h + gap_y) for path, p in got["pos"].items()}
    assert rows == {"a": 0, "b": 1, "d": 1, "c": 2}  # c waits for b, which waits for a
    assert got["height"] == pad * 2 + 3 * (node_h + gap_y) - gap_y
    assert got["width"] == pad * 2 + 2 * (node_w + gap_x) - gap_x  # the widest row holds two tasks
    # a row of one is centred over the widest row
    assert got["pos"]["a"]["x"] == pad + (node_w + gap_x) / 2 == got["pos"]["c"]["x"]


def test_layout_orders_a_row_by_its_parents_places_and_ignores_unknown_or_cyclic_deps(page: Any) -> None:
    nodes = [{"path": "left", "deps": []}, {"path": "right", "deps": []},
             {"path": "under-right", "deps": ["right"]}, {"path": "under-left", "deps": ["left", "elsewhere"]}]
    got = run(page, "layout.js", LAYOUT, nodes)
    pos = got["pos"]
    assert pos["left"]["x"] < pos["right"]["x"]
    assert pos["under-left"]["x"] < pos["under-right"]["x"]  # no crossing edges
    assert pos["under-left"]["y"] == pos["under-right"]["y"] > pos["left"]["y"]
    looped = run(page, "layout.js", LAYOUT, [{"path": "x", "deps": ["y"]}, {"path": "y", "deps": ["x"]}])
    assert set(looped["pos"]) == {"x", "y"}  # a cycle (never in a pipeline) still ends
    empty = run(page, "layout.js", LAYOUT, [])
    assert empty["pos"] == {} and empty["width"] > 0


MARKDOWN = ("(m, text) => { const root = m.renderMarkdown(text); return {blocks: [...root.children].map((c) => "
            "[c.tagName.toLowerCase(), c.textContent]), scripts: root.querySelectorAll('script,img,iframe').length, "
            "links: [...root.querySelectorAll('a')].map((a) => "
            "[a.getAttribute('href'), a.textContent, a.target, a.rel]), "
            "inline: [...root.querySelectorAll('strong,em,code,li,th,td')].map((e) => "
            "[e.tagName.toLowerCase(), e.textContent])}; }")


def test_markdown_blocks_become_elements(page: Any) -> None:
    text = ("# Title\r\n\nSome *soft*\nwrapped **bold** text with `code`.\n\n- one\n- two\n\n1. first\n2) second\n\n"
            "```\n# not a heading\n<b>raw</b>\n```\n| a | b |\n|---|:-:|\n| 1 | 2 |\n###### deep")
    got = run(page, "markdown.js", MARKDOWN, text)
    assert got["blocks"] == [
        ["h3", "Title"],  # levels move down two: the preview sits under the page's own headings
        ["p", "Some soft wrapped bold text with code."],
        ["ul", "onetwo"],
        ["ol", "firstsecond"],
        ["pre", "# not a heading\n<b>raw</b>"],
        ["table", "ab12"],
        ["h6", "deep"],
    ]
    assert ["em", "soft"] in got["inline"] and ["strong", "bold"] in got["inline"] and ["code", "code"] in got["inline"]
    assert [tag for tag, _ in got["inline"] if tag in ("th", "td")] == ["th", "th", "td", "td"]


def test_markdown_never_parses_html_and_links_only_to_http(page: Any) -> None:
    text = ("Hi <script>window.pwned = 1</script> <img src=x onerror=alert(1)>\n\n"
            "[site](https://example.org/a) [bad](javascript:alert%281%29) [rel](/apis/v2beta1/runs)")
    got = run(page, "markdown.js", MARKDOWN, text)
    assert got["scripts"] == 0
    assert got["blocks"][0] == ["p", "Hi <script>window.pwned = 1</script> <img src=x onerror=alert(1)>"]
    assert got["links"] == [["https://example.org/a", "site", "_blank", "noopener noreferrer"]]
    assert got["blocks"][1][1] == "site bad rel"  # the other links stay as their text
    assert page.evaluate("window.pwned") is None


def test_durations_sizes_and_counts(page: Any) -> None:
    got = run(page, "format.js", """(m) => ({
      durations: [m.duration("2026-01-01T00:00:00Z", "2026-01-01T00:00:42Z"),
                  m.duration("2026-01-01T00:00:00Z", "2026-01-01T00:03:05Z"),
                  m.duration("2026-01-01T00:00:00Z", "2026-01-01T02:07:59Z"),
                  m.duration("2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z"),
                  m.duration("", "2026-01-01T00:00:00Z"), m.duration("garbage", "2026-01-01T00:00:00Z")],
      bytes: [m.fmtBytes(null), m.fmtBytes(0), m.fmtBytes(1023), m.fmtBytes(1536), m.fmtBytes(3 * 1024 ** 3),
              m.fmtBytes(2 * 1024 ** 6)],
      counts: [m.fmtCount(undefined), m.fmtCount(2), m.fmtCount(0.456), m.fmtCount("1.5")],
      times: [m.fmtTime(""), m.fmtTime("not a time")],
      values: [m.valueText("text"), m.valueText(3), m.valueText({a: [1]})],
    })""")
    assert got["durations"] == ["42s", "3m 5s", "2h 7m", "", "", ""]
    assert got["bytes"] == ["n/a", "0 B", "1023 B", "1.5 KiB", "3.0 GiB", "2048.0 PiB"]
    assert got["counts"] == ["n/a", "2", "0.46", "1.5"]
    assert got["times"] == ["", "not a time"]
    assert got["values"] == ["text", "3", '{\n "a": [\n  1\n ]\n}']


def test_kfp_v1_metrics_and_schedules(page: Any) -> None:
    got = run(page, "format.js", """(m) => {
      const metric = (name, value, format) => ({ name, number_value: value, format });
      const seven = [1, 2, 3, 4, 5, 6, 7].map((i) => metric(`m${i}`, i));
      return {
        numbers: [m.v1Number(metric("a", 0.9234, "PERCENTAGE")), m.v1Number(metric("b", 2)),
                  m.v1Number(metric("c", "0.5", "RAW"))],
        line: m.metricsText([metric("accuracy", 0.9), metric("loss", 0.25)]),
        long: m.metricsText(seven), none: [m.metricsText(null), m.metricsText([])],
        triggers: [m.triggerText({ cron_schedule: { cron: "0 * * * * *" } }),
                   m.triggerText({ periodic_schedule: { interval_second: 90 } }), m.triggerText(null)],
      };
    }""")
    assert got["numbers"] == ["92.340%", "2.000", "0.500"]
    assert got["line"] == "accuracy: 0.900 · loss: 0.250"
    assert got["long"] == "m1: 1.000 · m2: 2.000 · m3: 3.000 · m4: 4.000 · m5: 5.000 · m6: 6.000 …"
    assert got["none"] == ["", ""]
    assert got["triggers"] == ["cron 0 * * * * *", "every 90s", ""]


def test_routes_fold_the_links_kfp_client_prints(page: Any) -> None:
    hashes = ["", "#/", "#/runs/details/abc", "#/experiments/details/e%2F1", "#/pipelines/details/p/version/v",
              "#/jobs/default/job%201?x=1", "#/runs/r1/clone"]
    got = run(page, "router.js", "(m, hashes) => hashes.map((x) => m.routeParts(x))", hashes)
    assert got == [["runs"], ["runs"], ["runs", "abc"], ["experiments", "e/1"], ["pipelines", "p", "v"],
                   ["jobs", "default", "job 1"], ["runs", "r1", "clone"]]


def test_h_sets_attributes_listeners_and_text_only(page: Any) -> None:
    got = run(page, "dom.js", """(m) => {
      let clicked = 0;
      const el = m.h("button", { id: "b", className: "x y", disabled: false, hidden: true, title: null,
                                  onclick: () => { clicked += 1; } },
                     "<i>not markup</i>", 0, null, ["a", ["b"]], false);
      el.click();
      const svg = m.s("svg", { width: 10, "data-flag": false }, m.s("title", {}, "t"));
      return { attrs: el.getAttributeNames().sort(), cls: el.className, hidden: el.getAttribute("hidden"),
               text: el.textContent, children: el.children.length, clicked,
               svg: [svg.namespaceURI, svg.getAttribute("data-flag"), svg.firstChild.textContent] };
    }""")
    assert got["attrs"] == ["class", "hidden", "id"]  # false and null leave the attribute out, on* are listeners
    assert got["cls"] == "x y" and got["hidden"] == ""
    assert got["text"] == "<i>not markup</i>0ab" and got["children"] == 0  # text nodes only
    assert got["clicked"] == 1
    assert got["svg"] == ["http://www.w3.org/2000/svg", "false", "t"]
