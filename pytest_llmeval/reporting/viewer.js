// The page of `pytest-llmeval view` (issue 41): renders the payload in the script element #llmeval-data.
// Plain JS, no framework, no build step. Every text from the payload reaches the page through textContent or
// createTextNode, never innerHTML: outputs are model-written and may hold markup.
// Three views behind tabs, each built the first time it is shown (and again after a filter changed it):
// over time (charts), two runs side by side (per-row diff), one row across runs. Long lists render PAGE rows
// and a "show more" button, so a history of 500 runs x 1000 rows opens without freezing the page.
(function () {
  "use strict";

  const PAGE = 200;
  // Where what differs is longer than this on both sides, the texts are shown whole, not diffed.
  const DIFF_LONG = 3000;
  // The largest edit distance the diff looks for; beyond it the texts are simply different.
  const DIFF_MAX_EDITS = 1000;
  const EPS = 1e-9;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const VERDICT_MARKS = { pass: "✔", fail: "✘", warn: "!", skip: "–" };
  const SHAPES = ["circle", "square", "diamond", "triangle"];

  const app = document.getElementById("llmeval-app");

  // ---------------------------------------------------------------------------------------------------
  // DOM helpers: the only way this script makes elements.

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function svg(tag, attrs, children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  // Attributes by setAttribute; the key "text" sets textContent.
  function setAttrs(node, attrs) {
    if (!attrs) { return; }
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) { continue; }
      if (key === "text") {
        node.textContent = String(value);
      } else {
        node.setAttribute(key, String(value));
      }
    }
  }

  function append(node, children) {
    if (children === null || children === undefined) { return; }
    for (const child of Array.isArray(children) ? children : [children]) {
      if (child === null || child === undefined || child === false) { continue; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }

  function clear(node) {
    while (node.firstChild) { node.removeChild(node.firstChild); }
  }

  // ---------------------------------------------------------------------------------------------------
  // Formatting. The payload carries numbers, and each pair's one-line text as `history --diff` prints it.

  function missing(value) { return value === null || value === undefined; }

  function num(value, digits) {
    return missing(value) ? "–" : Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  function signed(value) {
    return missing(value) ? "–" : (value >= 0 ? "+" : "") + Number(value).toFixed(3);
  }

  function interval(ci) {
    return Array.isArray(ci) && ci.length === 2 ? "[" + num(ci[0]) + ", " + num(ci[1]) + "]" : "–";
  }

  // As formatting.p_value: two significant digits, more only where rounding would cross alpha.
  function pValue(p, alpha) {
    if (missing(p)) { return "–"; }
    for (let digits = 2; digits <= 16; digits++) {
      const shown = Number(p).toPrecision(digits);
      if (missing(alpha) || (Number(shown) < alpha) === (p < alpha)) { return String(Number(shown)); }
    }
    return String(p);
  }

  // Runs are numbered as `pytest-llmeval history` numbers them: 1 = oldest.
  function runNumber(index) { return "#" + (index + 1); }

  function runTitle(index) {
    const run = data.runs[index];
    return runNumber(index) + " " + (run.label || run.name) + (run.time ? " · " + run.time : "") +
      (run.complete ? "" : " · partial");
  }

  // A run name as the shell needs it in the suggested command.
  function shellWord(word) {
    return /^[A-Za-z0-9._/:+@=-]+$/.test(word) ? word : "'" + word.replace(/'/g, "'\\''") + "'";
  }

  function statusClass(status) {
    return Object.prototype.hasOwnProperty.call(VERDICT_MARKS, status) ? status : "unknown";
  }

  // ---------------------------------------------------------------------------------------------------
  // The payload, and what the views derive from it once.

  let data;
  const derived = {};

  function text(index) { return missing(index) ? null : data.strings[index]; }

  function derive() {
    const benchmarks = new Set();
    const columns = new Set();
    const identities = new Set();
    for (const run of data.runs) {
      identities.add(run.identity);
      for (const name of Object.keys(run.benchmarks || {})) { benchmarks.add(name); }
      for (const column of run.columns || []) { columns.add(column); }
    }
    for (const name of Object.keys(data.rows || {})) { benchmarks.add(name); }
    const tags = new Set();
    const difficulties = new Set();
    for (const rows of Object.values(data.rows || {})) {
      for (const list of rows.tags || []) {
        for (const tag of list || []) { tags.add(tag); }
      }
      for (const difficulty of rows.difficulty || []) {
        if (!missing(difficulty)) { difficulties.add(difficulty); }
      }
    }
    derived.benchmarks = Array.from(benchmarks);
    derived.columns = Array.from(columns);
    derived.identities = Array.from(identities);
    derived.newestIdentity = data.runs.length ? data.runs[data.runs.length - 1].identity : null;
    derived.tags = Array.from(tags).sort();
    derived.difficulties = Array.from(difficulties).sort(byDifficulty);
    derived.rowIndex = new Map();  // benchmark -> Map(row id -> position), built when first asked
  }

  function byDifficulty(a, b) {
    const order = { easy: 0, medium: 1, hard: 2 };
    const x = a in order ? order[a] : 3, y = b in order ? order[b] : 3;
    return x - y || (a < b ? -1 : a > b ? 1 : 0);
  }

  // A column keeps its colour (and its place in the palette) in every chart.
  function colourOf(column) { return "c" + (Math.max(0, derived.columns.indexOf(column)) % 6); }

  // The rows of a benchmark, every per-row array present (empty when the payload has none).
  function rowsOf(bench) {
    const rows = (data.rows || {})[bench] || {};
    return {
      ids: rows.ids || [],
      input: rows.input || [],
      expected: rows.expected || [],
      difficulty: rows.difficulty || [],
      tags: rows.tags || [],
    };
  }

  function rowPosition(bench, id) {
    if (!derived.rowIndex.has(bench)) {
      const index = new Map();
      rowsOf(bench).ids.forEach(function (rowId, position) { index.set(rowId, position); });
      derived.rowIndex.set(bench, index);
    }
    return derived.rowIndex.get(bench).get(id);
  }

  // One row's cell in one run and column: {out: text or null, score: number or null, passed: true, false or
  // null}, or null when the run has no such column for the benchmark.
  function cell(bench, run, column, position) {
    const perRun = ((data.cells || {})[bench] || {})[String(run)];
    const flat = perRun ? perRun[column] : undefined;
    if (!flat) { return null; }
    const score = flat[2 * position + 1];
    const passes = (((data.passed || {})[bench] || {})[String(run)] || {})[column];
    const verdict = passes ? passes[position] : undefined;
    return {
      out: text(flat[2 * position]),
      score: missing(score) ? null : score,
      passed: verdict === 1 ? true : verdict === 0 ? false : null,
    };
  }

  function rowError(bench, run, id) {
    const perRun = ((data.errors || {})[bench] || {})[String(run)];
    return perRun && Object.prototype.hasOwnProperty.call(perRun, id) ? perRun[id] : null;
  }

  // The column whose score passes or fails a benchmark's rows in a run: its adapter's in a run of several
  // (payload: per benchmark), else the run's.
  function evaluatedIn(run, bench) {
    const entry = (run.benchmarks || {})[bench];
    return (entry && entry.evaluated) || run.evaluated;
  }

  function present(c) { return c !== null && (c.out !== null || c.score !== null); }

  // Passed: the score reached the row's threshold, as the run judged it (payload.passed). A payload without
  // it (written by hand) falls back to full marks.
  function passed(c) {
    if (c === null || c.score === null) { return false; }
    return c.passed !== null && c.passed !== undefined ? c.passed : c.score >= 1 - EPS;
  }

  function change(before, after) {
    if (missing(before) || missing(after)) { return "unchanged"; }
    if (after < before - EPS) { return "regressed"; }
    if (after > before + EPS) { return "improved"; }
    return "unchanged";
  }

  // ---------------------------------------------------------------------------------------------------
  // Filters: one bar above the views. Benchmark and model column narrow every view; tag, difficulty and
  // outcome narrow the row lists of the two-runs and row views.

  const filters = { bench: "", tag: "", difficulty: "", column: "", outcome: "" };

  function select(id, label, options, value, onChange) {
    const node = el("select", { id: id });
    for (const [optionValue, optionText] of options) {
      node.appendChild(el("option", { value: optionValue, text: optionText }));
    }
    node.value = value;
    node.addEventListener("change", function () { onChange(node.value); });
    return el("label", { for: id }, [label + " ", node]);
  }

  function filterBar() {
    const pick = function (key) {
      return function (value) {
        filters[key] = value;
        markAllStale();
        show(current);
      };
    };
    const all = [["", "all"]];
    const same = (values) => all.concat(values.map((v) => [v, v]));
    const outcomes = [["", "all"], ["regressed", "regressed"], ["improved", "improved"],
      ["unchanged", "unchanged"], ["passed", "passed"], ["failed", "failed"]];
    return el("div", { class: "filters", role: "group", "aria-label": "Filters" }, [
      select("f-bench", "Benchmark", same(derived.benchmarks), "", pick("bench")),
      select("f-tag", "Tag", same(derived.tags), "", pick("tag")),
      select("f-difficulty", "Difficulty", same(derived.difficulties), "", pick("difficulty")),
      select("f-column", "Model column", [["", "all (lists: run B's evaluated)"]]
        .concat(derived.columns.map((c) => [c, c])), "", pick("column")),
      select("f-outcome", "Outcome", outcomes, "", pick("outcome")),
    ]);
  }

  function benchesShown() {
    return derived.benchmarks.filter((b) => !filters.bench || b === filters.bench);
  }

  function rowKept(rows, position) {
    if (filters.tag && (rows.tags[position] || []).indexOf(filters.tag) === -1) { return false; }
    if (filters.difficulty && rows.difficulty[position] !== filters.difficulty) { return false; }
    return true;
  }

  function outcomeKept(kind, c) {
    switch (filters.outcome) {
      case "": return true;
      case "passed": return passed(c);
      case "failed": return c !== null && c.score !== null && !passed(c);
      default: return kind === filters.outcome;
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // Paging: a list renders PAGE items, then a button adds PAGE more. Returns the button, or null.

  function paged(container, items, render) {
    let shown = 0;
    const more = el("button", { type: "button", class: "more" });
    function step() {
      const end = Math.min(items.length, shown + PAGE);
      const fragment = document.createDocumentFragment();
      for (; shown < end; shown++) { fragment.appendChild(render(items[shown], shown)); }
      container.appendChild(fragment);
      if (shown >= items.length) {
        if (more.parentNode) { more.parentNode.removeChild(more); }
      } else {
        more.textContent = "show more (" + shown + " of " + items.length + " shown)";
      }
    }
    more.addEventListener("click", step);
    step();
    return shown < items.length ? more : null;
  }

  function table(caption, headers, className) {
    const body = el("tbody");
    const node = el("table", { class: className || null }, [
      el("caption", { text: caption }),
      el("thead", null, el("tr", null, headers.map((h) => el("th", { scope: "col", text: h })))),
      body,
    ]);
    return { node: node, body: body };
  }

  function outBox(value, note) {
    if (value === null) { return el("span", { class: "muted", text: note || "(no output)" }); }
    if (value === "") { return el("span", { class: "muted", text: "(empty)" }); }
    return el("div", { class: "out", text: value });
  }

  // ---------------------------------------------------------------------------------------------------
  // View a: over time. Per benchmark one chart: a line per model column through the complete runs of the
  // chosen series, the CI as a band, a break where the benchmark file or its prompt changed, and the
  // no_regression verdict of each run under the axis. A table of the same numbers follows.

  let series = null;

  function buildTime(panel) {
    if (series === null) { series = derived.newestIdentity; }
    if (derived.identities.length > 1) {
      const options = derived.identities.map((identity) => [identity, identity]);
      const onChange = function (value) {
        series = value;
        stale.time = true;
        show("time", "t-series");
      };
      panel.appendChild(el("div", { class: "controls" },
        select("t-series", "Series", options, series, onChange)));
    }
    if (filters.tag || filters.difficulty || filters.outcome) {
      panel.appendChild(el("p", { class: "muted", text: "The tag, difficulty and outcome filters narrow " +
        "the row lists of the other two views; these charts are of whole runs." }));
    }
    if (!derived.benchmarks.length) {
      panel.appendChild(el("p", { text: "The history holds no benchmark." }));
    }
    const columns = derived.columns.filter((c) => !filters.column || c === filters.column);
    for (const bench of benchesShown()) {
      const runs = [];
      data.runs.forEach(function (run, index) {
        if (run.complete && run.identity === series && (run.benchmarks || {})[bench]) { runs.push(index); }
      });
      const section = el("section", { class: "bench", "data-benchmark": bench }, el("h3", { text: bench }));
      panel.appendChild(section);
      if (!runs.length) {
        section.appendChild(el("p", { class: "muted",
          text: "No complete run of this series has this benchmark." }));
        continue;
      }
      const used = columns.filter((c) => runs.some((r) => scoresOf(r, bench)[c]));
      section.appendChild(legend(used));
      section.appendChild(el("div", { class: "chart" }, timeChart(bench, runs, used)));
      section.appendChild(timeTable(bench, runs, used));
    }
  }

  function scoresOf(run, bench) { return data.runs[run].benchmarks[bench].scores || {}; }

  function legend(columns) {
    const items = columns.map(function (column, i) {
      return el("span", null, [el("span", { class: "swatch " + colourOf(column) }),
        " " + column + " (" + SHAPES[i % SHAPES.length] + ")"]);
    });
    const marks = "┆ benchmark or prompt changed; ✔ ✘ ! – no_regression";
    items.push(el("span", { class: "muted", text: marks }));
    return el("div", { class: "legend", "aria-hidden": "true" }, items);
  }

  // Where the benchmark's file hash or prompt fingerprint differs from the run before (null counts as a
  // value: a run that cannot say which file it ran is not known to have run the same one).
  function breakReason(bench, before, after) {
    const a = data.runs[before].benchmarks[bench], b = data.runs[after].benchmarks[bench];
    const same = (key) => (missing(a[key]) ? null : a[key]) === (missing(b[key]) ? null : b[key]);
    const why = [];
    if (!same("hash")) { why.push("benchmark file"); }
    if (!same("prompt")) { why.push("prompt"); }
    return why.length ? why.join(" and ") + " changed" : null;
  }

  // Each column's points get their own shape too, so no line is told apart by colour alone.
  function shape(kind, x, y, attrs) {
    const r = 4, s = r + 1;
    if (kind === "square") {
      return svg("rect", Object.assign({ x: x - r, y: y - r, width: 2 * r, height: 2 * r }, attrs));
    }
    if (kind === "diamond") {
      const d = `M${x} ${y - s}L${x + s} ${y}L${x} ${y + s}L${x - s} ${y}Z`;
      return svg("path", Object.assign({ d: d }, attrs));
    }
    if (kind === "triangle") {
      const d = `M${x} ${y - s}L${x + s} ${y + r}L${x - s} ${y + r}Z`;
      return svg("path", Object.assign({ d: d }, attrs));
    }
    return svg("circle", Object.assign({ cx: x, cy: y, r: r }, attrs));
  }

  function timeChart(bench, runs, columns) {
    const n = runs.length;
    const left = 52, right = 20, top = 22, bottom = 52;
    const width = Math.max(560, Math.min(1300, left + right + 16 * n));
    const height = 280;
    const plotW = width - left - right, plotH = height - top - bottom;
    // Scores are shares (0 to 1) unless some run says otherwise.
    let lo = 0, hi = 1;
    for (const r of runs) {
      for (const c of columns) {
        const s = scoresOf(r, bench)[c];
        if (!s) { continue; }
        for (const v of [s.mean].concat(s.ci || [])) {
          if (!missing(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
        }
      }
    }
    const x = (i) => left + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1));
    const y = (v) => top + plotH - ((v - lo) / (hi - lo || 1)) * plotH;
    const title = "Scores of " + bench + " over " + n + " complete run" + (n === 1 ? "" : "s");
    const root = svg("svg", { width: width, height: height, viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": title + "; the table below has the same numbers", "font-family": "system-ui, sans-serif",
      "font-size": 11, class: "time-chart", "data-benchmark": bench });
    root.appendChild(svg("title", { text: title }));
    for (let t = 0; t <= 4; t++) {
      const v = lo + ((hi - lo) * t) / 4;
      root.appendChild(svg("line", { class: "grid", x1: left, x2: width - right, y1: y(v), y2: y(v) }));
      root.appendChild(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", text: num(v, 2) }));
    }
    const axisY = top + plotH;
    root.appendChild(svg("line", { class: "axis", x1: left, x2: width - right, y1: axisY, y2: axisY }));
    // Segments: the runs between two breaks. Lines and bands never cross a break.
    const segments = [[0]];
    for (let i = 1; i < n; i++) {
      const why = breakReason(bench, runs[i - 1], runs[i]);
      if (!why) {
        segments[segments.length - 1].push(i);
        continue;
      }
      segments.push([i]);
      const bx = (x(i - 1) + x(i)) / 2;
      const mark = svg("line", { class: "break", x1: bx, x2: bx, y1: top - 6, y2: axisY,
        "data-run": runs[i] });
      mark.appendChild(svg("title", { text: why + " between " + runNumber(runs[i - 1]) + " and " +
        runNumber(runs[i]) }));
      root.appendChild(mark);
      root.appendChild(svg("text", { class: "break-label", x: bx + 2, y: top - 8, text: "changed" }));
    }
    columns.forEach(function (column, ci) {
      const colour = colourOf(column);
      const at = (i) => scoresOf(runs[i], bench)[column] || null;
      const hasMean = (i) => at(i) !== null && !missing(at(i).mean);
      const hasCi = (i) => at(i) !== null && Array.isArray(at(i).ci) && !missing(at(i).ci[0]) &&
        !missing(at(i).ci[1]);
      for (const segment of segments) {
        // The band: one polygon per stretch of consecutive runs that have an interval.
        let stretch = [];
        const flush = function () {
          if (stretch.length) {
            root.appendChild(band(stretch, x, (i) => y(at(i).ci[0]), (i) => y(at(i).ci[1]), colour));
          }
          stretch = [];
        };
        for (const i of segment) {
          if (hasCi(i)) { stretch.push(i); } else { flush(); }
        }
        flush();
        const line = segment.filter(hasMean);
        if (line.length > 1) {
          root.appendChild(svg("polyline", { class: "line " + colour,
            points: line.map((i) => x(i) + "," + y(at(i).mean)).join(" ") }));
        }
      }
      for (let i = 0; i < n; i++) {
        if (!hasMean(i)) { continue; }
        const s = at(i);
        const point = shape(SHAPES[ci % SHAPES.length], x(i), y(s.mean),
          { class: "point " + colour, "data-run": runs[i], "data-column": column });
        point.appendChild(svg("title", { text: runTitle(runs[i]) + ": " + column + " " + num(s.mean) +
          " (CI " + interval(s.ci) + ", n " + (missing(s.n) ? "?" : s.n) + ")" }));
        root.appendChild(point);
      }
    });
    // no_regression per run, under the axis; run numbers below it.
    for (let i = 0; i < n; i++) {
      const verdict = data.runs[runs[i]].benchmarks[bench].no_regression;
      if (!verdict) { continue; }
      const status = statusClass(verdict.status);
      const mark = svg("text", { class: "verdict verdict-" + status, x: x(i), y: axisY + 16,
        "data-run": runs[i], text: VERDICT_MARKS[status] || "?" });
      mark.appendChild(svg("title", { text: runNumber(runs[i]) + " no_regression " + verdict.status +
        (verdict.message ? ": " + verdict.message : "") }));
      root.appendChild(mark);
    }
    const every = Math.max(1, Math.ceil(n / 12));
    for (let i = 0; i < n; i += every) {
      root.appendChild(svg("text", { x: x(i), y: height - 12, "text-anchor": "middle",
        text: runNumber(runs[i]) }));
    }
    return root;
  }

  // A CI band through the stretch of run positions `stretch` (a narrow box for a single run).
  function band(stretch, x, low, high, colour) {
    let pts;
    if (stretch.length === 1) {
      const i = stretch[0];
      pts = [[x(i) - 3, high(i)], [x(i) + 3, high(i)], [x(i) + 3, low(i)], [x(i) - 3, low(i)]];
    } else {
      pts = stretch.map((i) => [x(i), high(i)]).concat(stretch.slice().reverse().map((i) => [x(i), low(i)]));
    }
    return svg("polygon", { class: "ci " + colour, points: pts.map((p) => p.join(",")).join(" ") });
  }

  function timeTable(bench, runs, columns) {
    const headers = ["run", "time"].concat(columns.map((c) => c + " mean [CI]"), ["no_regression", "change"]);
    const t = table("Scores of " + bench + " per complete run (oldest first)", headers, "list time-table");
    const more = paged(t.body, runs, function (r, i) {
      const run = data.runs[r];
      const verdict = run.benchmarks[bench].no_regression;
      const cells = [el("td", { text: runNumber(r) + " " + (run.label || run.name) }),
        el("td", { text: run.time || "–" })];
      for (const column of columns) {
        const s = scoresOf(r, bench)[column];
        cells.push(el("td", { class: "num", text: s ? num(s.mean) + " " + interval(s.ci) : "–" }));
      }
      if (verdict) {
        const status = statusClass(verdict.status);
        cells.push(el("td", { class: "verdict-" + status, title: verdict.message || null,
          text: (VERDICT_MARKS[status] ? VERDICT_MARKS[status] + " " : "") + String(verdict.status) }));
      } else {
        cells.push(el("td", { text: "–" }));
      }
      cells.push(el("td", { text: i > 0 ? breakReason(bench, runs[i - 1], r) || "" : "" }));
      return el("tr", { "data-run": r }, cells);
    });
    return el("div", null, [t.node, more]);
  }

  // ---------------------------------------------------------------------------------------------------
  // The character diff: Myers' O((N+M)D) algorithm on code points, after the common prefix and suffix.

  function diffText(a, b) {
    if (a === b) { return [["=", a]]; }
    const A = Array.from(a), B = Array.from(b);
    let p = 0;
    while (p < A.length && p < B.length && A[p] === B[p]) { p++; }
    let s = 0;
    while (s < A.length - p && s < B.length - p && A[A.length - 1 - s] === B[B.length - 1 - s]) { s++; }
    const midA = A.slice(p, A.length - s), midB = B.slice(p, B.length - s);
    const whole = [["-", midA.join("")], ["+", midB.join("")]];
    let middle;
    if (!midA.length) {
      middle = [["+", midB.join("")]];
    } else if (!midB.length) {
      middle = [["-", midA.join("")]];
    } else if (midA.length > DIFF_LONG && midB.length > DIFF_LONG) {
      middle = whole;
    } else {
      middle = myers(midA, midB, DIFF_MAX_EDITS) || whole;
    }
    const out = p ? [["=", A.slice(0, p).join("")]] : [];
    if (s) { middle = middle.concat([["=", A.slice(A.length - s).join("")]]); }
    return merge(out, middle);
  }

  // Appends `ops` to `out`, joining neighbours of one kind.
  function merge(out, ops) {
    for (const [op, part] of ops) {
      if (out.length && out[out.length - 1][0] === op) {
        out[out.length - 1][1] += part;
      } else {
        out.push([op, part]);
      }
    }
    return out;
  }

  // The shortest edit script of a into b as [[op, text]], or null when it needs more than maxD edits.
  function myers(a, b, maxD) {
    const n = a.length, m = b.length, off = maxD + 1;
    const v = new Int32Array(2 * maxD + 3);
    const trace = [];  // trace[d]: v[k] for k in [-d-1, d+1] before step d
    for (let d = 0; d <= maxD; d++) {
      trace.push(v.slice(off - d - 1, off + d + 2));
      for (let k = -d; k <= d; k += 2) {
        const down = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]);
        let x = down ? v[off + k + 1] : v[off + k - 1] + 1;
        let y = x - k;
        while (x < n && y < m && a[x] === b[y]) { x++; y++; }
        v[off + k] = x;
        if (x >= n && y >= m) { return backtrack(trace, a, b, d); }
      }
    }
    return null;
  }

  function backtrack(trace, a, b, edits) {
    const ops = [];
    let x = a.length, y = b.length;
    for (let d = edits; d > 0; d--) {
      const before = (k) => trace[d][k + d + 1];
      const k = x - y;
      const prevK = k === -d || (k !== d && before(k - 1) < before(k + 1)) ? k + 1 : k - 1;
      const prevX = before(prevK), prevY = prevX - prevK;
      while (x > prevX && y > prevY) { ops.push(["=", a[x - 1]]); x--; y--; }
      ops.push(prevK === k + 1 ? ["+", b[y - 1]] : ["-", a[x - 1]]);
      x = prevX;
      y = prevY;
    }
    while (x > 0 && y > 0) { ops.push(["=", a[x - 1]]); x--; y--; }
    return merge([], ops.reverse());
  }

  // One side of a diff: the common text plain, this side's own text in <del> (A) or <ins> (B).
  function diffBox(ops, side) {
    const box = el("div", { class: "out" });
    for (const [op, part] of ops) {
      if (op === "=") {
        box.appendChild(document.createTextNode(part));
      } else if (op === side) {
        box.appendChild(el(side === "-" ? "del" : "ins", { text: part }));
      }
    }
    return box;
  }

  // ---------------------------------------------------------------------------------------------------
  // View b: two runs side by side.

  const pair = { a: null, b: null };

  function defaultPair() {
    const n = data.runs.length;
    const d = data.default_pair;
    if (Array.isArray(d) && d.length === 2 && d.every((i) => Number.isInteger(i) && i >= 0 && i < n)) {
      return d;
    }
    return [Math.max(0, n - 2), Math.max(0, n - 1)];
  }

  function buildPair(panel) {
    if (!data.runs.length) {
      panel.appendChild(el("p", { text: "The history holds no run." }));
      return;
    }
    if (pair.a === null) { [pair.a, pair.b] = defaultPair(); }
    const options = data.runs.map((run, index) => [String(index), runTitle(index)]);
    const pick = function (side) {
      return function (value) {
        pair[side] = Number(value);
        stale.pair = true;
        show("pair", "p-" + side);
      };
    };
    panel.appendChild(el("div", { class: "controls" }, [
      select("p-a", "Run A", options, String(pair.a), pick("a")),
      select("p-b", "Run B", options, String(pair.b), pick("b")),
    ]));
    const runA = data.runs[pair.a], runB = data.runs[pair.b];
    if (pair.a === pair.b) {
      panel.appendChild(el("p", { class: "notice", text: "A and B are the same run." }));
    }
    panel.appendChild(el("p", { text: "Comparing " +
      (filters.column ? "column " + filters.column + " (the model column filter)"
        : "each benchmark's evaluated column in run B") + ": " +
      runTitle(pair.a) + " (A) against " + runTitle(pair.b) + " (B)." }));
    for (const bench of benchesShown()) {
      const inA = (runA.benchmarks || {})[bench], inB = (runB.benchmarks || {})[bench];
      if (!inA && !inB) { continue; }
      const section = el("section", { class: "bench", "data-benchmark": bench }, el("h3", { text: bench }));
      panel.appendChild(section);
      section.appendChild(pairStats(bench));
      if (!inA || !inB) {
        section.appendChild(el("p", { class: "muted", text: "Only run " + (inA ? "A" : "B") +
          " has this benchmark." }));
        continue;
      }
      const column = filters.column || evaluatedIn(runB, bench);
      section.appendChild(el("p", { class: "muted pair-column", text: "column " + column }));
      section.appendChild(pairRows(bench, column));
    }
  }

  function pairStats(bench) {
    const entry = (data.pairs || []).find((p) => p.a === pair.a && p.b === pair.b && p.benchmark === bench);
    if (!entry) {
      const command = "pytest-llmeval view --pair " + shellWord(data.runs[pair.a].name) + " " +
        shellWord(data.runs[pair.b].name);
      return el("p", { class: "notice pair-missing" },
        ["paired statistics not computed for this pair: run ", el("code", { text: command })]);
    }
    if (entry.reason) { return el("p", { class: "notice pair-reason", text: entry.reason }); }
    const facts = [["rows in common", String(entry.n)], ["mean A", num(entry.mean_a)],
      ["mean B", num(entry.mean_b)], ["difference B − A", signed(entry.difference)],
      ["CI", interval(entry.ci)], ["test", String(entry.test)], ["p", pValue(entry.p_value, data.alpha)],
      ["significant", entry.significant ? "yes" : "no"]];
    const list = el("dl", { class: "pair" });
    for (const [key, value] of facts) { append(list, [el("dt", { text: key }), el("dd", { text: value })]); }
    const line = entry.text ? el("p", { class: "stats", text: "B vs A on " + entry.n + " shared rows: " +
      entry.text }) : null;
    return el("div", { class: "pair-stats" }, [list, line]);
  }

  function pairRows(bench, column) {
    const rows = rowsOf(bench);
    const groups = { regressed: [], improved: [], unchanged: [] };
    let both = 0;
    for (let position = 0; position < rows.ids.length; position++) {
      const ca = cell(bench, pair.a, column, position), cb = cell(bench, pair.b, column, position);
      if (!present(ca) || !present(cb)) { continue; }
      both++;
      if (!rowKept(rows, position)) { continue; }
      const kind = change(ca.score, cb.score);
      if (!outcomeKept(kind, cb)) { continue; }
      groups[kind].push({ position: position, a: ca, b: cb, kind: kind });
    }
    const items = groups.regressed.concat(groups.improved, groups.unchanged);
    const wrap = el("div", { class: "pair-rows" });
    if (!both) {
      wrap.appendChild(el("p", { class: "muted", text: "No row of column " + column + " in both runs." }));
      return wrap;
    }
    const hidden = items.length < both ? " (of " + both + " rows in both runs; the filters hide the rest)"
      : "";
    wrap.appendChild(el("p", { class: "counts", text: groups.regressed.length + " regressed, " +
      groups.improved.length + " improved, " + groups.unchanged.length + " unchanged" + hidden }));
    const t = table("Rows of " + bench + " in both runs, regressed first",
      ["id", "input", "expected", "A output", "B output", "A score", "B score"], "list pair-table");
    const more = paged(t.body, items, (item) => pairRow(bench, rows, item));
    append(wrap, [t.node, more]);
    return wrap;
  }

  function pairRow(bench, rows, item) {
    const id = rows.ids[item.position];
    const ops = item.a.out !== null && item.b.out !== null ? diffText(item.a.out, item.b.out) : null;
    const errorA = rowError(bench, pair.a, id), errorB = rowError(bench, pair.b, id);
    const jump = el("button", { type: "button", class: "link", title: "this row across runs", text: id });
    jump.addEventListener("click", function () { openRow(bench, id); });
    const tags = (rows.tags[item.position] || []).join(", ");
    const meta = [rows.difficulty[item.position], tags].filter(Boolean);
    const arrow = item.kind === "regressed" ? " ▼" : item.kind === "improved" ? " ▲" : "";
    return el("tr", { class: "row-" + item.kind, "data-id": id }, [
      el("td", null, [jump, meta.length ? el("div", { class: "muted", text: meta.join(" · ") }) : null]),
      el("td", null, outBox(text(rows.input[item.position]))),
      el("td", null, outBox(text(rows.expected[item.position]), "–")),
      el("td", { class: "a-out" },
        ops ? diffBox(ops, "-") : outBox(item.a.out, errorA && "error: " + errorA)),
      el("td", { class: "b-out" },
        ops ? diffBox(ops, "+") : outBox(item.b.out, errorB && "error: " + errorB)),
      el("td", { class: "num", text: num(item.a.score) }),
      el("td", { class: "num", text: num(item.b.score) + arrow }),
    ]);
  }

  // ---------------------------------------------------------------------------------------------------
  // View c: one row across runs, oldest first.

  const rowPick = { bench: null, id: null };

  function openRow(bench, id) {
    rowPick.bench = bench;
    rowPick.id = id;
    stale.row = true;
    activate("row", true);
  }

  function buildRow(panel) {
    const benches = benchesShown().filter((b) => rowsOf(b).ids.length);
    if (!benches.length) {
      panel.appendChild(el("p", { text: "No benchmark has rows." }));
      return;
    }
    if (benches.indexOf(rowPick.bench) === -1) {
      rowPick.bench = benches[0];
      rowPick.id = null;
    }
    const rows = rowsOf(rowPick.bench);
    const offered = rows.ids.filter((id, position) => rowKept(rows, position));
    if (rowPick.id === null || rowPosition(rowPick.bench, rowPick.id) === undefined) {
      rowPick.id = offered.length ? offered[0] : null;
    }
    const list = el("datalist", { id: "r-ids" });
    // A datalist of every id of a huge benchmark would cost more than it helps: typing any id still works.
    for (const id of offered.slice(0, 5000)) { list.appendChild(el("option", { value: id })); }
    const input = el("input", { id: "r-id", type: "search", list: "r-ids", autocomplete: "off", size: 30 });
    input.value = rowPick.id === null ? "" : rowPick.id;
    const result = el("div", { class: "row-result" });
    // A new id redraws only the table: the input keeps its focus and caret while the reader types.
    const pickId = function () {
      if (rowPosition(rowPick.bench, input.value) !== undefined && input.value !== rowPick.id) {
        rowPick.id = input.value;
        clear(result);
        result.appendChild(rowTable(rowPick.bench, rowPick.id));
      }
    };
    input.addEventListener("change", pickId);
    input.addEventListener("input", pickId);
    const pickBench = function (value) {
      rowPick.bench = value;
      rowPick.id = null;
      stale.row = true;
      show("row", "r-bench");
    };
    const count = offered.length + " row ids" +
      (filters.tag || filters.difficulty ? " match the filters" : "");
    panel.appendChild(el("div", { class: "controls" }, [
      select("r-bench", "Benchmark", benches.map((b) => [b, b]), rowPick.bench, pickBench),
      el("label", { for: "r-id" }, ["Row id ", input]), list,
      el("span", { class: "muted", text: count }),
    ]));
    panel.appendChild(result);
    if (rowPick.id === null) {
      result.appendChild(el("p", { text: "No row matches the filters." }));
      return;
    }
    result.appendChild(rowTable(rowPick.bench, rowPick.id));
  }

  function rowTable(bench, id) {
    const position = rowPosition(bench, id);
    const rows = rowsOf(bench);
    const columns = derived.columns.filter(function (c) {
      return (!filters.column || c === filters.column) &&
        data.runs.some((run, r) => cell(bench, r, c, position) !== null);
    });
    const wrap = el("div", { class: "row-history", "data-benchmark": bench, "data-id": id });
    const facts = el("dl", { class: "meta" });
    const meta = [["input", text(rows.input[position])], ["expected", text(rows.expected[position])],
      ["difficulty", rows.difficulty[position]], ["tags", (rows.tags[position] || []).join(", ") || null]];
    for (const [key, value] of meta) {
      const shown = missing(value) ? "–" : el("div", { class: "out", text: value });
      append(facts, [el("dt", { text: key }), el("dd", null, shown)]);
    }
    wrap.appendChild(facts);
    const headers = ["run", "time", "state"];
    for (const c of columns) { headers.push(c + " output", c + " score"); }
    headers.push("change");
    const t = table("Row " + id + " of " + bench + " in every run (oldest first)", headers, "list row-table");
    // A line's change: its run's judged column against the last run before it that scored the row there.
    const lastScore = {}, lastOut = {};
    const lines = [];
    data.runs.forEach(function (run, r) {
      const judged = filters.column || evaluatedIn(run, bench);
      const cells = {};
      for (const c of columns) { cells[c] = cell(bench, r, c, position); }
      const own = cells[judged] || null;
      const score = own ? own.score : null;
      const kind = change(missing(lastScore[judged]) ? null : lastScore[judged], score);
      const changedOut = {};
      for (const c of columns) {
        if (present(cells[c])) {
          changedOut[c] = c in lastOut && lastOut[c] !== cells[c].out;
          lastOut[c] = cells[c].out;
        }
      }
      if (score !== null) { lastScore[judged] = score; }
      if (outcomeKept(kind, own)) {
        lines.push({ r: r, cells: cells, kind: kind, changedOut: changedOut });
      }
    });
    const more = paged(t.body, lines, (line) => rowLine(bench, id, columns, line));
    append(wrap, [t.node, more]);
    return wrap;
  }

  function rowLine(bench, id, columns, line) {
    const run = data.runs[line.r];
    const error = rowError(bench, line.r, id);
    const state = run.complete ? "complete" : "partial" + (run.reason ? ": " + run.reason : "");
    const tds = [el("td", { text: runNumber(line.r) + " " + (run.label || run.name) }),
      el("td", { text: run.time || "–" }), el("td", { text: state })];
    for (const c of columns) {
      const v = line.cells[c];
      if (!present(v)) {
        const why = v === null ? "–" : error ? "error: " + error : "(not in this run)";
        tds.push(el("td", { class: "muted", text: why }), el("td", { class: "num", text: "–" }));
        continue;
      }
      const changed = line.changedOut[c];
      tds.push(el("td", { class: changed ? "changed" : null, title: changed ? "output changed" : null },
        outBox(v.out, error && "error: " + error)));
      tds.push(el("td", { class: "num", text: num(v.score) }));
    }
    const marks = { regressed: "▼ regressed", improved: "▲ improved", unchanged: "" };
    tds.push(el("td", { text: marks[line.kind] }));
    const changed = Object.values(line.changedOut).some(Boolean) ? " changed" : "";
    return el("tr", { class: "row-" + line.kind + changed, "data-run": line.r }, tds);
  }

  // ---------------------------------------------------------------------------------------------------
  // Tabs (WAI-ARIA tabs, manual activation): Tab reaches the selected tab, the arrows, Home and End move
  // between tabs, Enter or Space shows the focused one. Manual, so that arrowing past a view of a large
  // history does not build it.

  const VIEWS = [
    { key: "time", label: "Over time", build: buildTime },
    { key: "pair", label: "Two runs side by side", build: buildPair },
    { key: "row", label: "A row across runs", build: buildRow },
  ];
  const tabs = {}, panels = {}, stale = {};
  let current = "time";

  function markAllStale() {
    for (const view of VIEWS) { stale[view.key] = true; }
  }

  // Builds view `key` if it is stale; `refocus`: the id of one of its controls to give the focus back to.
  function show(key, refocus) {
    if (!stale[key]) { return; }
    const panel = panels[key];
    clear(panel);
    VIEWS.find((v) => v.key === key).build(panel);
    stale[key] = false;
    const control = refocus ? document.getElementById(refocus) : null;
    if (control) { control.focus(); }
  }

  function activate(key, focus) {
    current = key;
    for (const view of VIEWS) {
      const on = view.key === key;
      tabs[view.key].setAttribute("aria-selected", on ? "true" : "false");
      tabs[view.key].tabIndex = on ? 0 : -1;
      panels[view.key].hidden = !on;
    }
    show(key);
    if (focus) { tabs[key].focus(); }
  }

  function onTabKey(event) {
    const keys = VIEWS.map((v) => v.key);
    const at = keys.indexOf(event.currentTarget.id.slice("tab-".length));
    const moves = { ArrowRight: at + 1, ArrowLeft: at - 1 + keys.length, Home: 0, End: keys.length - 1 };
    if (!(event.key in moves)) { return; }
    event.preventDefault();
    tabs[keys[moves[event.key] % keys.length]].focus();
  }

  function buildTabs() {
    const list = el("div", { role: "tablist", "aria-label": "Views" });
    for (const view of VIEWS) {
      const tab = el("button", { type: "button", role: "tab", id: "tab-" + view.key,
        "aria-controls": "panel-" + view.key, "aria-selected": "false", tabindex: -1, text: view.label });
      tab.addEventListener("click", function () { activate(view.key, true); });
      tab.addEventListener("keydown", onTabKey);
      tabs[view.key] = tab;
      panels[view.key] = el("section", { role: "tabpanel", id: "panel-" + view.key,
        "aria-labelledby": "tab-" + view.key, tabindex: 0, hidden: "hidden" });
      list.appendChild(tab);
    }
    return list;
  }

  // ---------------------------------------------------------------------------------------------------

  function main() {
    data = JSON.parse(document.getElementById("llmeval-data").textContent);
    window.llmevalTimes = { parsed: performance.now() };
    if (data.version !== 1) {
      throw new Error("this page reads payload version 1, the file holds version " + String(data.version));
    }
    data.runs = data.runs || [];
    derive();
    markAllStale();
    append(app, [buildTabs(), filterBar()]);
    for (const view of VIEWS) { app.appendChild(panels[view.key]); }
    activate("time", false);
    window.llmevalTimes.firstView = performance.now();
    document.documentElement.setAttribute("data-js", "ready");
    // After the browser painted the first view: the time a reader waits for it.
    requestAnimationFrame(function () {
      setTimeout(function () {
        window.llmevalTimes.painted = performance.now();
        document.documentElement.setAttribute("data-painted", "yes");
      }, 0);
    });
  }

  try {
    main();
  } catch (error) {
    const why = error && error.message ? error.message : String(error);
    app.appendChild(el("p", { class: "error", role: "alert",
      text: "The viewer could not draw this history: " + why }));
    document.documentElement.setAttribute("data-js", "error");
    throw error;
  }
})();
