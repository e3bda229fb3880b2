/* memtrace report: renders the JSON embedded in #report-data. No dependencies, no network.
   All text goes through textContent; the only HTML inserted as markup is the plot and the diffs, which
   the Python side builds with every piece escaped. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var PREVIEW = 600;
  var ETYPE_COLOURS = {
    ExtractionError: "#ea580c", UpdateError: "#9333ea", DeletionError: "#e11d48",
    RetrievalError: "#2563eb", ResponseError: "#ca8a04", GoldError: "#64748b", Unattributed: "#94a3b8"
  };
  var state = { etypes: {}, op: "", cat: "", q: "", caseId: null, nodeId: null, view: null };

  // helpers -------------------------------------------------------------------------------------------
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "text") el.textContent = v;
        else if (k === "cls") el.className = v;
        else if (k === "on") Object.keys(v).forEach(function (e) { el.addEventListener(e, v[e]); });
        else if (k === "style") el.setAttribute("style", v);
        else el.setAttribute(k, v === true ? "" : v);
      });
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
  function s(tag, attrs) {
    var el = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") el.textContent = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined) el.setAttribute(k, attrs[k]);
    });
    return el;
  }
  function colour(etype) {
    if (ETYPE_COLOURS[etype]) return ETYPE_COLOURS[etype];
    var hash = 0;
    for (var i = 0; i < String(etype).length; i++) hash = (hash * 31 + String(etype).charCodeAt(i)) % 360;
    return "hsl(" + hash + ", 55%, 45%)";
  }
  function chip(etype, extra) {
    return h("span", { cls: "chip et", style: "--c:" + colour(etype), "data-etype": etype },
      h("span", { cls: "dot" }), etype, extra ? h("span", { cls: "n", text: extra }) : null);
  }
  function plain(text, cls) { return h("span", { cls: "chip " + (cls || "plain"), text: text }); }
  function num(v, digits) {
    if (v === null || v === undefined || v === "" || isNaN(v)) return "–";
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 0 : digits });
  }
  function pct(v) { return v === null || v === undefined || isNaN(v) ? "–" : (100 * v).toFixed(1) + "%"; }
  function secs(v) {
    if (v === null || v === undefined || isNaN(v)) return "–";
    v = Number(v);
    if (v < 1) return (1000 * v).toFixed(0) + " ms";
    if (v < 120) return v.toFixed(1) + " s";
    if (v < 7200) return (v / 60).toFixed(1) + " min";
    return (v / 3600).toFixed(1) + " h";
  }
  function txt(v) { return v && typeof v === "object" && v.$s !== undefined ? D.strings[v.$s] : v; }
  function textBlock(text, limit) {
    limit = limit || PREVIEW;
    text = txt(text);
    text = text === null || text === undefined ? "" : String(text);
    var pre = h("pre", { cls: "txt" });
    if (text.length <= limit) { pre.textContent = text || "(empty)"; return pre; }
    pre.textContent = text.slice(0, limit) + " …";
    var open = false;
    var btn = h("button", { cls: "linkish more", text: "show more (" + num(text.length) + " characters)" });
    btn.addEventListener("click", function () {
      open = !open;
      pre.textContent = open ? text : text.slice(0, limit) + " …";
      btn.textContent = open ? "show less" : "show more (" + num(text.length) + " characters)";
    });
    return h("div", null, pre, btn);
  }
  function table(headers, rows, numeric) {
    numeric = numeric || [];
    var t = h("table", { cls: "t" });
    t.appendChild(h("thead", null, h("tr", null, headers.map(function (x, i) {
      return h("th", { cls: numeric.indexOf(i) >= 0 ? "num" : null, text: x });
    }))));
    var body = h("tbody");
    rows.forEach(function (r) {
      body.appendChild(h("tr", null, r.map(function (cell, i) {
        return h("td", { cls: numeric.indexOf(i) >= 0 ? "num" : null }, cell);
      })));
    });
    t.appendChild(body);
    return t;
  }

  // summary -------------------------------------------------------------------------------------------
  function renderSummary() {
    var S = D.summary, root = document.getElementById("summary");
    document.getElementById("run-title").appendChild(h("span", null, h("b", { text: S.run }),
      "  ·  " + (S.system || "?") + " on " + (S.dataset || "?")));
    var overall = (S.accuracy && S.accuracy.overall) || {};
    var counts = S.counts || {}, T = S.totals || {};
    var failed = D.cases.length;
    root.appendChild(h("div", { cls: "section-head" }, h("h2", { text: "Run summary" }),
      plain(S.system || "system ?"), plain(S.dataset || "dataset ?")));
    var judged = overall.judge !== null && overall.judge !== undefined;
    var cards = [
      judged ? ["Judge accuracy", pct(overall.judge), "LLM judge" + (overall.accuracy !== null ? " · rule " + pct(overall.accuracy) : "")]
             : ["Accuracy", pct(overall.accuracy), "rule-based (no judge)"],
      ["Token F1", pct(overall.f1), "BLEU-1 " + pct(overall.bleu1)],
      ["Questions", num(counts.questions), num(failed) + " failed · " + num(counts.correct) + " correct"],
      ["LM calls", num(T.calls), num(T.cache_hits) + " cached · " + num(T.failures) + " failed"],
      ["Tokens", num((T.prompt_tokens || 0) + (T.completion_tokens || 0)), num(T.prompt_tokens) + " in · " + num(T.completion_tokens) + " out"],
      ["Time", secs(S.seconds), "LM time " + secs(T.seconds)]
    ];
    if (S.lineage && S.lineage.length) {
      root.appendChild(h("div", { cls: "panel lineage-warning" }, h("h3", { text: "Lineage breaks" }),
        h("ul", null, S.lineage.map(function (line) { return h("li", { text: line.replace(/^lineage: /, "") }); }))));
    }
    if (S.lineage_content) root.appendChild(h("p", { cls: "lineage-note", text: S.lineage_content }));
    root.appendChild(h("div", { cls: "cards" }, cards.map(function (c) {
      return h("div", { cls: "card" }, h("div", { cls: "k", text: c[0] }), h("div", { cls: "v", text: c[1] }), h("div", { cls: "s", text: c[2] }));
    })));
    var grid = h("div", { cls: "grid2" });
    var cats = (S.accuracy && S.accuracy.by_category) || {};
    grid.appendChild(h("div", { cls: "panel" }, h("h3", { text: "Accuracy by category" }), table(
      ["Category", "Questions", "F1", "BLEU-1", judged ? "Judge" : "Accuracy", ""],
      Object.keys(cats).map(function (k) {
        var c = cats[k], j = judged ? c.judge : c.accuracy;
        return [k, num(c.count), pct(c.f1), pct(c.bleu1), pct(j), h("div", { cls: "bar" }, h("i", { style: "width:" + (100 * (j || 0)).toFixed(1) + "%" }))];
      }).concat([[h("b", { text: "overall" }), num(overall.count), pct(overall.f1), pct(overall.bleu1), pct(judged ? overall.judge : overall.accuracy), ""]]), [1, 2, 3, 4])));
    var models = S.models || {};
    grid.appendChild(h("div", { cls: "panel" }, h("h3", { text: "Models by role" }), table(
      ["Role", "Model", "API base"],
      Object.keys(models).map(function (role) {
        var m = models[role] || {};
        return [role, h("span", { cls: "mono", text: typeof m === "string" ? m : (m.model || "–") }), m.api_base || "local"];
      }))));
    var usage = S.usage || {};
    grid.appendChild(h("div", { cls: "panel" }, h("h3", { text: "LM usage by role" }), table(
      ["Role", "Calls", "Prompt tok.", "Completion tok.", "Time", "Cached", "Failed"],
      Object.keys(usage).map(function (role) {
        var u = usage[role] || {};
        return [role, num(u.calls), num(u.prompt_tokens), num(u.completion_tokens), secs(u.seconds), num(u.cache_hits), num(u.failures)];
      }), [1, 2, 3, 4, 5, 6])));
    var kv = h("dl", { cls: "kv" });
    function pair(k, v) { kv.appendChild(h("dt", { text: k })); kv.appendChild(h("dd", { cls: "mono", text: typeof v === "object" ? JSON.stringify(v) : String(v) })); }
    var data = S.data || {};
    Object.keys(data).forEach(function (k) { pair("data." + k, data[k]); });
    var program = S.program || {};
    Object.keys(program).forEach(function (k) { pair("program." + k, program[k]); });
    if (S.started_at) pair("started", S.started_at);
    Object.keys(S.versions || {}).forEach(function (k) { pair(k, S.versions[k]); });
    grid.appendChild(h("div", { cls: "panel" }, h("h3", { text: "Data slice & settings" }), kv));
    root.appendChild(grid);
  }

  // failures list -------------------------------------------------------------------------------------
  function renderFilters() {
    var bar = document.getElementById("etype-bar"), chips = document.getElementById("etype-filters");
    var total = D.cases.length || 1;
    Object.keys(D.error_types).forEach(function (et) {
      var n = D.error_types[et];
      bar.appendChild(h("i", { style: "--c:" + colour(et) + ";width:" + (100 * n / total) + "%", title: et + ": " + n }));
      var b = h("button", { cls: "chip", style: "--c:" + colour(et), "data-etype": et, "aria-pressed": "false" },
        h("span", { cls: "dot" }), et, h("span", { cls: "n", text: String(n) }));
      b.addEventListener("click", function () {
        state.etypes[et] = !state.etypes[et];
        b.classList.toggle("on", state.etypes[et]);
        b.setAttribute("aria-pressed", String(state.etypes[et]));
        renderList();
      });
      chips.appendChild(b);
    });
    var opSel = document.getElementById("op-filter");
    opSel.appendChild(h("option", { value: "", text: "all operations" }));
    Object.keys(D.ops).forEach(function (op) { opSel.appendChild(h("option", { value: op, text: op + " (" + D.ops[op] + ")" })); });
    opSel.addEventListener("change", function () { state.op = opSel.value; renderList(); });
    var catSel = document.getElementById("cat-filter"), cats = {};
    D.cases.forEach(function (c) { cats[c.category] = (cats[c.category] || 0) + 1; });
    catSel.appendChild(h("option", { value: "", text: "all categories" }));
    Object.keys(cats).sort().forEach(function (c) { catSel.appendChild(h("option", { value: c, text: c + " (" + cats[c] + ")" })); });
    catSel.addEventListener("change", function () { state.cat = catSel.value; renderList(); });
    var search = document.getElementById("search");
    search.addEventListener("input", function () { state.q = search.value.toLowerCase(); renderList(); });
  }
  function visibleCases() {
    var any = Object.keys(state.etypes).some(function (k) { return state.etypes[k]; });
    return D.cases.filter(function (c) {
      if (any && !state.etypes[c.etype]) return false;
      if (state.op && c.op !== state.op) return false;
      if (state.cat && c.category !== state.cat) return false;
      if (state.q && (c.question + " " + c.gold + " " + c.prediction + " " + c.qid).toLowerCase().indexOf(state.q) < 0) return false;
      return true;
    });
  }
  function renderList() {
    var list = document.getElementById("case-list");
    list.textContent = "";
    var cases = visibleCases();
    if (!cases.length) list.appendChild(h("div", { cls: "empty", text: D.cases.length ? "No failed question matches the filters." : "No failed questions in this run." }));
    cases.forEach(function (c) {
      var item = h("button", { cls: "case-item" + (c.id === state.caseId ? " sel" : ""), "data-case": c.id },
        h("span", { cls: "row" }, chip(c.etype), c.category ? plain(c.category) : null,
          D.labels && D.labels[c.id] ? plain("labelled", "ok labelled") : null),
        h("span", { cls: "q", text: c.question }),
        h("span", { cls: "m", text: c.qid + (c.op ? "  ·  " + c.op : "") }));
      item.addEventListener("click", function () { selectCase(c.id); });
      list.appendChild(item);
    });
  }

  // one question --------------------------------------------------------------------------------------
  function caseById(id) { for (var i = 0; i < D.cases.length; i++) if (D.cases[i].id === id) return D.cases[i]; return null; }
  function selectCase(id, nodeId, keepHash) {
    var c = caseById(id);
    if (!c) return;
    state.caseId = id;
    Array.prototype.forEach.call(document.querySelectorAll(".case-item"), function (el) {
      el.classList.toggle("sel", el.getAttribute("data-case") === id);
    });
    renderCase(c, nodeId);
    if (keepHash) return;
    try { history.replaceState(null, "", "#case=" + encodeURIComponent(id)); } catch (e) { /* file: urls in some browsers */ }
  }
  function renderCase(c, nodeId) {
    var root = document.getElementById("case-detail"), below = document.getElementById("case-graph");
    root.textContent = "";
    below.textContent = "";
    var scores = c.scores || {};
    var head = h("div", { cls: "panel qhead" },
      h("div", { cls: "row" }, chip(c.etype), plain(c.qid), c.category ? plain(c.category) : null,
        plain("F1 " + num(scores.f1, 2)), plain("BLEU-1 " + num(scores.bleu1, 2)), plain("judge " + num(scores.judge, 2)),
        c.evidence.length ? plain("evidence " + c.evidence.join(", ")) : null),
      h("div", { cls: "question", text: c.question }),
      h("div", { cls: "answers" },
        h("div", { cls: "answer-box" }, h("div", { cls: "k", text: "Gold" }), h("div", { text: c.gold })),
        h("div", { cls: "answer-box pred" }, h("div", { cls: "k", text: "Prediction" }), h("div", { text: c.prediction || "(empty)" }))),
      c.error ? h("div", { cls: "verdict", style: "--c:#e11d48" }, h("b", { text: "The program failed on this question: " }), c.error) : null);
    if (!c.verdicts.length) head.appendChild(h("div", { cls: "verdict", style: "--c:#94a3b8" }, "No attribution verdict for this question."));
    c.verdicts.forEach(function (v) {
      var et = v.error_type || "Unattributed";
      var box = h("div", { cls: "verdict", style: "--c:" + colour(et) },
        h("div", { cls: "row" }, chip(et),
          v.op_id ? h("span", null, "blamed op ", h("button", { cls: "linkish", "data-node": v.op_id, text: (v.op || "?") + "  " + v.op_id, on: { click: function () { selectNode(v.op_id, true); } } })) : null,
          v.predictor ? plain(v.predictor) : null,
          v.confidence !== null && v.confidence !== undefined ? plain("confidence " + num(v.confidence, 2)) : null),
        v.reason ? h("div", { cls: "reason", text: v.reason }) : null,
        v.error ? h("div", { cls: "reason", text: "Attribution failed: " + v.error }) : null,
        v.confirmed === true || v.confirmed === false ? h("div", { cls: "reason confirm", text: v.confirmed
          ? "Confirmed by replay: repairing this op's output saved the answer."
          : "Not confirmed: " + num(v.replays) + " replay" + (v.replays === 1 ? "" : "s") + " of a repair did not save the answer." }) : null,
        h("div", { cls: "meta", text: "method " + (v.method || "?") + (v.cost ? "  ·  " + num(v.cost.lm_calls) + " LM calls, " + num((v.cost.prompt_tokens || 0) + (v.cost.completion_tokens || 0)) + " tokens, " + secs(v.cost.seconds) : "") + (v.cost && v.cost.replay_calls ? "  ·  replays " + num(v.cost.replay_calls) + " LM calls, " + num((v.cost.replay_prompt_tokens || 0) + (v.cost.replay_completion_tokens || 0)) + " tokens" : "") }));
      head.appendChild(box);
    });
    head.appendChild(labelForm(c));
    root.appendChild(head);
    var view = c.view ? D.views[c.view] : null;
    if (!view) { below.appendChild(h("div", { cls: "panel empty", text: "No evolution graph was recorded for this question." })); return; }
    renderGraph(below, c, view, nodeId);
  }

  // labelling ------------------------------------------------------------------------------------------
  // Served by `memtrace serve`, a label is posted and written to RUN/labels.jsonl at once; opened as a plain
  // file, the page keeps the labels (and in localStorage across reloads) and downloads labels.jsonl.
  var LABEL_TYPES = ["ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError", "GoldError"];
  var L = D.labelling || { mode: "download", file: "labels.jsonl" };
  D.labels = D.labels || {};
  var STORE = "memtrace-labels:" + ((D.summary && D.summary.run) || "");
  if (L.mode !== "server") {
    try {
      var kept = JSON.parse(localStorage.getItem(STORE) || "{}");
      Object.keys(kept).forEach(function (k) { if (caseById(k)) D.labels[k] = kept[k]; });
    } catch (e) { /* storage off for file: pages in some browsers */ }
  }
  function remember() { try { localStorage.setItem(STORE, JSON.stringify(D.labels)); } catch (e) { /* see above */ } }
  function labelLines() {
    return Object.keys(D.labels).map(function (k) { return JSON.stringify(D.labels[k]); }).join("\n") + "\n";
  }
  function download() {
    var blob = new Blob([labelLines()], { type: "application/x-ndjson" });
    var a = h("a", { href: URL.createObjectURL(blob), download: L.file || "labels.jsonl" });
    document.body.appendChild(a);
    a.click();
    a.remove();
  }
  function viewOps(c) {
    var view = c.view ? D.views[c.view] : null;
    if (!view) return [];
    return view.nodes.map(function (n) { return n[0]; })
      .filter(function (id) { return nodeInfo(view, id).k === "op"; })
      .map(function (id) { return { id: id, info: nodeInfo(view, id) }; })
      .sort(function (a, b) { return (a.info.seq || 0) - (b.info.seq || 0); });
  }
  function savedLabel(line) {
    if (!line) return h("div", { cls: "label-saved none", id: "label-saved", text: "Not labelled yet." });
    return h("div", { cls: "label-saved", id: "label-saved", "data-etype": line.error_type },
      h("div", { cls: "row" }, h("b", { text: "Label" }), chip(line.error_type),
        (line.ops || []).map(function (op) { return plain(op); }),
        plain("by " + (line.by || "?")), plain(line.at || "")),
      line.rationale ? h("div", { cls: "reason", text: line.rationale }) : null);
  }
  function labelForm(c) {
    var line = D.labels[c.id] || null, ops = viewOps(c);
    var box = h("div", { cls: "label-form", id: "label-form", "data-case": c.id });
    var saved = savedLabel(line);
    box.appendChild(h("h3", { text: "Root cause (your label)" }));
    box.appendChild(saved);
    var etype = h("select", { id: "label-etype", "aria-label": "error type" }, h("option", { value: "", text: "error type…" }),
      LABEL_TYPES.map(function (t) { return h("option", { value: t, text: t }); }));
    etype.value = line ? line.error_type : "";
    var chosen = {};
    (line ? line.ops || [] : []).forEach(function (op) { chosen[op] = true; });
    var opList = h("div", { cls: "label-ops" }, ops.length ? ops.map(function (o) {
      var box = h("input", { type: "checkbox", cls: "label-op", value: o.id });
      box.checked = !!chosen[o.id];
      return h("label", { title: o.info.op || o.id }, box, " " + o.id + "  " + (o.info.op || ""));
    }) : h("span", { cls: "meta", text: "No graph view: name the op ids below." }));
    var shown = {};
    ops.forEach(function (o) { shown[o.id] = true; });
    var other = h("input", { type: "text", id: "label-other-ops", placeholder: "other op ids, e.g. op:7 op:12",
      value: Object.keys(chosen).filter(function (op) { return !shown[op]; }).join(" ") });
    var rationale = h("input", { type: "text", id: "label-rationale", placeholder: "one line: the evidence you relied on",
      value: line ? line.rationale || "" : "" });
    var by = h("input", { type: "text", id: "label-by", placeholder: "your name", value: (line && line.by) || L.by || "" });
    var status = h("span", { cls: "meta", id: "label-status" });
    function gold() {
      var off = etype.value === "GoldError";
      Array.prototype.forEach.call(opList.querySelectorAll("input"), function (i) { i.disabled = off; });
      other.disabled = off;
    }
    etype.addEventListener("change", gold);
    gold();
    function form() {
      var picked = Array.prototype.filter.call(opList.querySelectorAll("input.label-op"), function (i) { return i.checked; })
        .map(function (i) { return i.value; });
      picked = picked.concat(other.value.split(/[\s,]+/).filter(Boolean));
      return { case_id: c.id, error_type: etype.value, ops: etype.value === "GoldError" ? [] : picked,
               rationale: rationale.value.replace(/\s+/g, " ").trim(), by: by.value.trim() };
    }
    function stored(lineNow, note) {
      D.labels[c.id] = lineNow;
      box.replaceChild(savedLabel(lineNow), box.querySelector("#label-saved"));
      status.textContent = note;
      var item = document.querySelector('.case-item[data-case="' + (window.CSS && CSS.escape ? CSS.escape(c.id) : c.id) + '"]');
      if (item && !item.querySelector(".labelled")) item.querySelector(".row").appendChild(plain("labelled", "ok labelled"));
      if (dl) dl.textContent = "Download labels.jsonl (" + Object.keys(D.labels).length + ")";
    }
    function save() {
      var f = form();
      if (!f.error_type) { status.textContent = "Choose an error type."; return; }
      if (f.error_type !== "GoldError" && !f.ops.length) { status.textContent = "Tick the root-cause op (or several), or choose GoldError."; return; }
      if (L.mode === "server") {
        status.textContent = "saving…";
        fetch(L.endpoint || "labels", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(f) })
          .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
          .then(function (r) {
            if (r.ok) stored(r.body, "Saved to labels.jsonl.");
            else status.textContent = "Not saved: " + (r.body.error || "the server refused it");
          })
          .catch(function (e) { status.textContent = "Not saved: " + e; });
        return;
      }
      var names = {};
      ops.forEach(function (o) { names[o.id] = o.info.op || null; });
      var at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      stored({ schema_version: 1, case_id: f.case_id, error_type: f.error_type, op_id: f.ops[0] || null,
               op: f.ops.length ? names[f.ops[0]] || null : null, source: "human", ops: f.ops, rationale: f.rationale,
               by: f.by, at: at }, "Kept in this page: download labels.jsonl to keep it.");
      remember();
    }
    var dl = L.mode === "server" ? null : h("button", { cls: "tool wide", id: "label-download", text: "Download labels.jsonl (" + Object.keys(D.labels).length + ")", on: { click: download } });
    box.appendChild(h("div", { cls: "label-grid" },
      h("div", { cls: "k", text: "Error type" }), etype,
      h("div", { cls: "k", text: "Root-cause op(s)" }), h("div", null, opList, other),
      h("div", { cls: "k", text: "Rationale" }), rationale,
      h("div", { cls: "k", text: "Labelled by" }), by));
    box.appendChild(h("div", { cls: "row" },
      h("button", { cls: "tool wide", id: "label-save", text: L.mode === "server" ? "Save label" : "Keep label", on: { click: save } }),
      dl, status));
    return box;
  }

  // graph ---------------------------------------------------------------------------------------------
  var OP_W = 148, OP_H = 44, VAR_W = 132, VAR_H = 34;
  function nodeInfo(view, id) { return (D.nodes[view.sample] || {})[id] || { k: "var", label: id, sub: "" }; }
  function size(info) { return info.k === "op" ? [OP_W, OP_H] : [VAR_W, VAR_H]; }
  function varClass(id, info) {
    var kind = id.split(":")[0];
    if (kind === "turn") return "turn";
    if (kind === "mem" || info.vtype === "memory") return "memory";
    if (kind === "q") return "question";
    if (kind === "ans") return "answer";
    return "value";
  }
  function renderGraph(root, c, view, nodeId) {
    var et = c.etype, blamedColour = colour(et);
    var wrap = h("div", { cls: "graph-wrap" });
    var panel = h("div", { cls: "graph-panel" });
    var status = h("span", { cls: "status" });
    if (view.reaches) status.appendChild(h("span", null, h("b", { cls: "ok", text: "The evidence turns' lineage reaches the answer" }), " (solid green); the blamed op shows where the needed fact went wrong."));
    else status.appendChild(h("span", null, h("b", { cls: "lost", text: "The evidence never reaches the answer:" }), " its lineage (green dashes) stops before the answer; the blamed op shows where."));
    if (view.missing.length) status.appendChild(h("span", { text: "  Evidence not in the graph: " + view.missing.join(", ") + "." }));
    if (view.truncated) status.appendChild(h("span", { text: "  Showing the most relevant nodes only." }));
    var svg = s("svg", { "class": "graph", id: "graph-svg", "aria-label": "evolution graph of " + c.qid });
    var defs = s("defs");
    [["a-def", "#cbd5e1"], ["a-r", "#94a3b8"], ["a-f", "#6ee7b7"], ["a-p", "#059669"], ["a-v", "#b45309"]].forEach(function (m) {
      var marker = s("marker", { id: m[0], viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
      marker.appendChild(s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: m[1] }));
      defs.appendChild(marker);
    });
    svg.appendChild(defs);
    var vp = s("g", { "class": "viewport" });
    svg.appendChild(vp);
    var pos = {};
    view.nodes.forEach(function (n) { pos[n[0]] = n; });
    var edgeLayer = s("g"), nodeLayer = s("g");
    vp.appendChild(edgeLayer); vp.appendChild(nodeLayer);
    view.edges.forEach(function (e) {
      var a = pos[e[0]], b = pos[e[1]];
      if (!a || !b) return;
      var sa = size(nodeInfo(view, e[0])), sb = size(nodeInfo(view, e[1]));
      var x1 = a[1] + sa[0] / 2, y1 = a[2], x2 = b[1] - sb[0] / 2, y2 = b[2], d;
      if (x2 > x1 + 10) {
        var dx = Math.max(30, (x2 - x1) / 2);
        d = "M" + x1 + "," + y1 + " C" + (x1 + dx) + "," + y1 + " " + (x2 - dx) + "," + y2 + " " + x2 + "," + y2;
      } else {
        var lowY = Math.max(y1, y2) + 60;
        d = "M" + x1 + "," + y1 + " C" + (x1 + 60) + "," + lowY + " " + (x2 - 60) + "," + lowY + " " + x2 + "," + y2;
      }
      var cls = "edge " + (e[2] === "version" ? "version" : e[3]);
      var marker = e[2] === "version" ? "a-v" : e[3] ? "a-" + e[3] : "a-def";
      var path = s("path", { d: d, "class": cls, "marker-end": "url(#" + marker + ")", "data-src": e[0], "data-dst": e[1] });
      path.appendChild(s("title", { text: e[2] + ": " + e[0] + " → " + e[1] }));
      edgeLayer.appendChild(path);
    });
    view.nodes.forEach(function (n) {
      var id = n[0], x = n[1], y = n[2], flags = n[3], info = nodeInfo(view, id), sz = size(info);
      var classes = ["node", info.k === "op" ? "op" : "var"];
      if (info.k === "op" && info.predictor) classes.push("lm");
      if (info.k !== "op") classes.push(varClass(id, info));
      if (info.deleted) classes.push("deleted");
      if (flags.indexOf("p") >= 0) classes.push("ev");
      if (flags.indexOf("e") >= 0) classes.push("evt");
      if (flags.indexOf("b") >= 0) classes.push("blamed");
      var g = s("g", { "class": classes.join(" "), "data-node": id, transform: "translate(" + (x - sz[0] / 2) + "," + (y - sz[1] / 2) + ")" });
      if (flags.indexOf("b") >= 0) {
        g.setAttribute("style", "--c:" + blamedColour);
        g.setAttribute("data-blamed", "true");
        g.appendChild(s("rect", { "class": "halo", x: -5, y: -5, width: sz[0] + 10, height: sz[1] + 10, rx: 10 }));
      }
      g.appendChild(s("rect", { "class": "frame", width: sz[0], height: sz[1], rx: info.k === "op" ? 6 : sz[1] / 2 }));
      if (info.k === "op") g.appendChild(s("rect", { "class": "band", width: 4, height: sz[1] - 8, x: 4, y: 4, rx: 2 }));
      var tx = info.k === "op" ? 14 : 12;
      g.appendChild(s("text", { "class": "t1", x: tx, y: info.k === "op" ? 18 : 14, text: info.label }));
      g.appendChild(s("text", { "class": "t2", x: tx, y: info.k === "op" ? 34 : 27, text: info.sub || "" }));
      g.appendChild(s("title", { text: id + (info.k === "op" ? "  " + (info.op || "") : "") }));
      if (flags.indexOf("b") >= 0) {
        var badge = s("g", { "class": "badge", style: "--c:" + blamedColour, transform: "translate(" + (sz[0] - 58) + ",-11)" });
        badge.appendChild(s("rect", { width: 58, height: 17, rx: 8.5 }));
        badge.appendChild(s("text", { x: 29, y: 12, "text-anchor": "middle", text: "BLAMED" }));
        g.appendChild(badge);
      }
      if (flags.indexOf("e") >= 0) {
        var eb = s("g", { "class": "badge", style: "--c:#059669", transform: "translate(" + (sz[0] - 64) + ",-10)" });
        eb.appendChild(s("rect", { width: 64, height: 16, rx: 8 }));
        eb.appendChild(s("text", { x: 32, y: 11.5, "text-anchor": "middle", text: "EVIDENCE" }));
        g.appendChild(eb);
      }
      g.addEventListener("click", function (ev) { ev.stopPropagation(); selectNode(id, false); });
      nodeLayer.appendChild(g);
    });
    var tools = h("span", { cls: "row" });
    var legend = h("div", { cls: "legend" },
      h("span", null, h("i", { style: "border-color:#059669;border-top-width:3px" }), "evidence → answer"),
      h("span", null, h("i", { style: "border-color:#6ee7b7;border-top-style:dashed" }), "where the evidence went"),
      h("span", null, h("i", { style: "border-color:#94a3b8" }), "question → answer"),
      h("span", null, h("i", { style: "border-color:#b45309;border-top-style:dotted" }), "memory version"),
      h("span", null, h("i", { cls: "box", style: "border-color:#f59e0b;background:#fffbeb" }), "memory unit"),
      h("span", null, h("i", { cls: "box", style: "border-color:#93c5fd;background:#eff6ff" }), "turn"),
      h("span", null, h("i", { cls: "box", style: "border-color:#4f46e5" }), "LM op"),
      h("span", null, h("i", { cls: "box", style: "border-color:" + blamedColour + ";border-width:3px" }), "blamed op"));
    panel.appendChild(h("div", { cls: "graph-bar" }, status, tools));
    if (view.trail && view.trail.length) {
      var trail = h("div", { cls: "trail", id: "trail" }, h("span", { cls: "lbl", text: "Ops in order" }));
      view.trail.forEach(function (op, i) {
        var info = nodeInfo(view, op), isBlamed = c.verdicts.some(function (v) { return v.op_id === op; });
        if (i) trail.appendChild(h("span", { cls: "arrow", text: "→" }));
        trail.appendChild(h("button", { cls: isBlamed ? "blamed" : null, style: isBlamed ? "--c:" + blamedColour : null,
          "data-node": op, title: op + "  " + (info.op || ""), text: info.label + " #" + info.seq,
          on: { click: function () { selectNode(op, true); } } }));
      });
      panel.appendChild(trail);
    }
    panel.appendChild(svg);
    panel.appendChild(legend);
    var inspector = h("div", { cls: "inspector", id: "inspector" });
    wrap.appendChild(panel);
    wrap.appendChild(inspector);
    root.appendChild(wrap);
    state.view = { c: c, view: view, svg: svg, vp: vp, inspector: inspector, k: 1, tx: 0, ty: 0 };
    var Z = state.view;
    function apply() { vp.setAttribute("transform", "translate(" + Z.tx + "," + Z.ty + ") scale(" + Z.k + ")"); }
    function fit() {
      // the whole graph when it is readable that small; else a readable zoom on the evidence and the blamed op
      var box = svg.getBoundingClientRect(), W = box.width || 900, H = box.height || 480;
      Z.k = Math.min(1.1, W / view.w, H / view.h);
      if (Z.k >= 0.66) { Z.tx = (W - view.w * Z.k) / 2; Z.ty = (H - view.h * Z.k) / 2; apply(); return; }
      Z.k = Math.max(0.66, Math.min(0.72, H / view.h));
      var marked = view.nodes.filter(function (n) { return n[3].indexOf("b") >= 0; });
      var turns = view.nodes.filter(function (n) { return n[3].indexOf("e") >= 0; });
      var anchor = marked[0] || view.nodes[view.nodes.length - 1];
      var left = turns.length ? Math.min.apply(null, turns.map(function (n) { return n[1]; })) : anchor[1];
      var span = (anchor[1] - left + 200) * Z.k;
      var cx = span < W ? (left + anchor[1]) / 2 : anchor[1];
      Z.tx = W / 2 - cx * Z.k;
      Z.ty = view.h * Z.k <= H ? (H - view.h * Z.k) / 2 : H / 2 - anchor[2] * Z.k;
      apply();
    }
    function zoom(f, cx, cy) {
      var box = svg.getBoundingClientRect();
      if (cx === undefined) { cx = box.width / 2; cy = box.height / 2; }
      var k = Math.max(0.15, Math.min(3, Z.k * f));
      Z.tx = cx - (cx - Z.tx) * (k / Z.k); Z.ty = cy - (cy - Z.ty) * (k / Z.k); Z.k = k;
      apply();
    }
    tools.appendChild(h("button", { cls: "tool", title: "zoom in", text: "+", on: { click: function () { zoom(1.25); } } }));
    tools.appendChild(h("button", { cls: "tool", title: "zoom out", text: "−", on: { click: function () { zoom(0.8); } } }));
    tools.appendChild(h("button", { cls: "tool", title: "fit", text: "⤢", on: { click: fit } }));
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var box = svg.getBoundingClientRect();
      zoom(ev.deltaY < 0 ? 1.1 : 0.9, ev.clientX - box.left, ev.clientY - box.top);
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (ev) {
      if (ev.target.closest && ev.target.closest(".node")) return;
      drag = { x: ev.clientX, y: ev.clientY, tx: Z.tx, ty: Z.ty };
      svg.classList.add("dragging");
    });
    window.addEventListener("pointermove", function (ev) {
      if (!drag) return;
      Z.tx = drag.tx + ev.clientX - drag.x; Z.ty = drag.ty + ev.clientY - drag.y; apply();
    });
    window.addEventListener("pointerup", function () { drag = null; svg.classList.remove("dragging"); });
    fit();
    var first = nodeId && pos[nodeId] ? nodeId : (view.nodes.filter(function (n) { return n[3].indexOf("b") >= 0; })[0] || [null])[0];
    if (first) selectNode(first, false);
    else inspector.appendChild(h("div", { cls: "empty", text: "Click a node to see its details." }));
  }

  function neighbours(view, id) {
    var ins = [], outs = [];
    view.edges.forEach(function (e) { if (e[1] === id) ins.push(e[0]); if (e[0] === id) outs.push(e[1]); });
    return { ins: ins, outs: outs };
  }
  function nodeButtons(view, ids) {
    return h("div", { cls: "nbrs" }, ids.map(function (n) {
      var info = nodeInfo(view, n);
      return h("button", { text: info.label, title: n, "data-node": n, on: { click: function () { selectNode(n, true); } } });
    }));
  }
  function section(title, body, extra) { return h("div", { cls: "insp-sec" + (extra ? " " + extra : "") }, h("div", { cls: "h", text: title }), body); }
  function selectNode(id, centre) {
    var Z = state.view;
    if (!Z) return;
    state.nodeId = id;
    Array.prototype.forEach.call(Z.svg.querySelectorAll(".node"), function (g) { g.classList.toggle("sel", g.getAttribute("data-node") === id); });
    Array.prototype.forEach.call(document.querySelectorAll("#trail button"), function (b) { b.classList.toggle("sel", b.getAttribute("data-node") === id); });
    var view = Z.view, info = nodeInfo(view, id), ins = Z.inspector;
    ins.textContent = "";
    ins.setAttribute("data-node", id);
    if (centre) {
      var n = view.nodes.filter(function (x) { return x[0] === id; })[0], box = Z.svg.getBoundingClientRect();
      if (n) { Z.tx = box.width / 2 - n[1] * Z.k; Z.ty = box.height / 2 - n[2] * Z.k; Z.vp.setAttribute("transform", "translate(" + Z.tx + "," + Z.ty + ") scale(" + Z.k + ")"); }
    }
    var nb = neighbours(view, id), grid;
    var blamedBy = Z.c.verdicts.filter(function (v) { return v.op_id === id; });
    if (info.k === "op") {
      ins.appendChild(h("h4", { text: info.op || id }));
      ins.appendChild(h("div", { cls: "sub", text: id + "  ·  seq " + info.seq + (info.duration !== null && info.duration !== undefined ? "  ·  " + secs(info.duration) : "") }));
      ins.appendChild(h("div", { cls: "row" },
        blamedBy.map(function (v) { return chip(v.error_type || "Unattributed", "blamed"); }),
        info.role ? plain(info.role) : null,
        info.predictor ? plain(info.predictor) : plain("no LM"),
        info.lm_calls.length ? plain(info.lm_calls.length + " LM call" + (info.lm_calls.length > 1 ? "s" : "")) : null,
        info.error ? plain("error", "no") : null));
      var grid = h("div", { cls: "insp-grid" });
      ins.appendChild(grid);
      if (info.error) grid.appendChild(section("Error", textBlock(info.error), "wide"));
      if (info.instructions) grid.appendChild(section("Instruction", h("div", { cls: "instruction" }, textBlock(info.instructions)), "wide"));
      grid.appendChild(section("Inputs", textBlock(info.inputs)));
      grid.appendChild(section("Outputs", textBlock(info.outputs)));
      if (info.lm_calls.length) {
        grid.appendChild(section("LM calls", info.lm_calls.map(function (call, i) {
          var d = h("details", { cls: "call" }, h("summary", { text: "#" + (i + 1) + "  " + (call.model || "?") + "  ·  " + num(call.prompt_tokens) + " → " + num(call.completion_tokens) + " tokens  ·  " + secs(call.seconds) + (call.cached ? "  ·  cached" : "") }));
          var body = h("div");
          call.messages.forEach(function (m) { body.appendChild(h("div", { cls: "msg-role", text: m.role })); body.appendChild(textBlock(m.content, 400)); });
          body.appendChild(h("div", { cls: "msg-role", text: "response" }));
          body.appendChild(textBlock(call.response, 400));
          d.appendChild(body);
          return d;
        }), "wide"));
      }
      Object.keys(info.extra || {}).forEach(function (k) { grid.appendChild(section(k, textBlock(info.extra[k], 200))); });
    } else {
      ins.appendChild(h("h4", { text: info.label }));
      ins.appendChild(h("div", { cls: "sub", text: id }));
      ins.appendChild(h("div", { cls: "row" }, plain(info.vtype || "value"),
        info.unit_id ? plain("unit " + info.unit_id + " v" + info.version) : null,
        info.deleted ? plain("deleted", "no") : null));
      grid = h("div", { cls: "insp-grid" });
      ins.appendChild(grid);
      grid.appendChild(section("Value", textBlock(info.value), "wide"));
      Object.keys(info.extra || {}).forEach(function (k) { grid.appendChild(section(k, textBlock(info.extra[k], 200))); });
    }
    if (nb.ins.length) grid.appendChild(section(info.k === "op" ? "Reads" : "Comes from", nodeButtons(view, nb.ins)));
    if (nb.outs.length) grid.appendChild(section(info.k === "op" ? "Writes" : "Goes to", nodeButtons(view, nb.outs)));
  }

  // optimization --------------------------------------------------------------------------------------
  function renderOptimize() {
    var O = D.optimize;
    if (!O) return;
    var root = document.getElementById("optimize");
    root.hidden = false;
    document.getElementById("nav-optimize").hidden = false;
    root.appendChild(h("div", { cls: "section-head" }, h("h2", { text: "Optimization" }),
      plain("baseline " + pct(O.baseline)), O.best !== null ? plain("best " + pct(O.best), "ok") : null,
      plain(O.rounds.length + " rounds"), O.stop_reason ? plain("stopped: " + O.stop_reason) : null,
      O.test ? plain(O.test.label + " " + pct(O.test.baseline) + " → " + pct(O.test.optimized) + " (" + num(O.test.questions) + " questions)", "plain test-figure") : null));
    var plot = h("div", { cls: "panel" }, h("h3", { text: "Validation accuracy by round" }));
    var holder = h("div", { id: "accuracy-plot" });
    holder.innerHTML = O.plot;  // built in Python, every text escaped
    plot.appendChild(holder);
    function localText(l) {  // the local objective's counts, or the local check's (--no-local-objective)
      if (l.targets !== undefined) {
        return "local: " + (l.fixed - l.lost >= 0 ? "+" : "") + (l.fixed - l.lost) + " net (carried " + l.carried + "/" + l.targets +
          ", seed " + l.seed_carried + ", lost " + l.lost + (l.bloat ? ", " + l.bloat + " bloated" : "") + ")";
      }
      return "local: fixed " + l.fixed + "/" + l.blamed + ", lost " + l.broken + "/" + l.kept;
    }
    var tbl = h("table", { cls: "t rounds" });
    tbl.appendChild(h("thead", null, h("tr", null, ["Round", "Blame counts", "Not fixable", "Chosen predictor", "Result", "Val acc.", "LM calls"].map(function (x, i) {
      return h("th", { cls: i >= 5 ? "num" : null, text: x });
    }))));
    var body = h("tbody");
    O.rounds.forEach(function (r) {
      var blames = Object.keys(r.blame_counts || {}).map(function (k) { return plain(k + " ×" + r.blame_counts[k]); });
      var nf = Object.keys(r.not_fixable || {}).map(function (k) { return plain(k + " ×" + r.not_fixable[k]); });
      body.appendChild(h("tr", null,
        h("td", { text: String(r.round) }), h("td", null, h("div", { cls: "row" }, blames)),
        h("td", null, h("div", { cls: "row" }, nf.length ? nf : "–")), h("td", null, h("span", { cls: "mono", text: r.chosen_predictor || "–" })),
        h("td", null, r.accepted ? plain("accepted", "ok") : plain("rejected", "no")),
        h("td", { cls: "num", text: pct(r.val_accuracy) }), h("td", { cls: "num", text: num(r.lm_calls) })));
      var cands = r.candidates || [];
      body.appendChild(h("tr", { cls: "cand-tr" }, h("td", { colspan: "7" }, h("details", { cls: "cands" },
        h("summary", { text: cands.length + " candidate" + (cands.length === 1 ? "" : "s") + " for " + (r.chosen_predictor || "?") +
          (r.local_set ? " · local set: " + r.local_set.calls + " calls, " + r.local_set.targets + " targets, the seed carries " + r.local_set.seed_carried : "") +
          (r.settings_changed && Object.keys(r.settings_changed).length ? " · settings changed: " + Object.keys(r.settings_changed).map(function (k) { return k + " " + r.settings_changed[k][0] + " → " + r.settings_changed[k][1]; }).join(", ") : "") }),
        cands.map(function (cd, i) {
          return h("div", { cls: "cand-row" },
            h("div", { cls: "row" }, plain("#" + (i + 1)), cd.accepted ? plain("accepted", "ok") : plain("rejected", "no"),
              plain("minibatch " + num(cd.minibatch_score, 3)), plain("val " + num(cd.val_score, 3)),
              cd.demos ? plain("+" + cd.demos + " demo" + (cd.demos === 1 ? "" : "s")) : null,
              cd.origin ? plain(cd.origin) : null,
              cd.settings && Object.keys(cd.settings).length ? plain(Object.keys(cd.settings).map(function (k) { return k + " " + cd.settings[k]; }).join(", ")) : null,
              cd.local ? plain(localText(cd.local)) : null,
              cd.why ? h("span", { cls: "meta", text: cd.why }) : null),
            textBlock(cd.instruction, 400));
        })))));
    });
    tbl.appendChild(body);
    var rounds = h("div", { cls: "panel", style: "margin-top:16px" }, h("h3", { text: "Rounds" }), tbl);
    var cut = O.interrupted;
    function cutParts(c) {  // what the cut round had done: each part of its plan it reached (older runs: none)
      var CUT_WHILE = { plan: "tracing and attributing", repairs: "repairing", "local set": "building the local set",
        proposals: "proposing", candidates: "scoring candidates", validation: "validating" };
      function counts(m) { return Object.keys(m).map(function (k) { return k + " ×" + m[k]; }).join(", "); }
      var parts = [];
      if (c.phase) parts.push(plain("cut while " + (CUT_WHILE[c.phase] || c.phase)));
      if (c.seconds !== undefined && c.seconds !== null) parts.push(plain(secs(c.seconds) + ", " + num(c.lm_calls) + " LM calls into the round"));
      if (c.blame_counts && c.phase) parts.push(plain("blamed: " + (counts(c.blame_counts) || "nothing")));
      if (c.not_fixable && Object.keys(c.not_fixable).length) parts.push(plain("not fixable by prompts: " + counts(c.not_fixable)));
      if (c.findings && c.findings.length) parts.push(plain("findings: " + c.findings.map(function (f) { return f.pattern; }).join(", ")));
      if (c.repairs) parts.push(plain("repairs: " + (c.repairs.tried || 0) + " tried, " + (c.repairs.confirmed || 0) + " confirmed"));
      if (c.local_set) parts.push(plain("local set: " + c.local_set.calls + " calls, " + c.local_set.targets + " targets, the seed carries " + c.local_set.seed_carried));
      return parts;
    }
    if (cut) {
      var reached = cutParts(cut);
      rounds.appendChild(h("div", { cls: "interrupted", style: "margin-top:12px" },
        h("div", { cls: "row" }, plain("round " + cut.round + " cut short", "no"),
          h("span", { cls: "mono", text: cut.chosen_predictor || "–" }), h("span", { cls: "meta", text: cut.why || "" })),
        reached.length ? h("div", { cls: "row cut-reached" }, reached) : null,
        (cut.candidates || []).map(function (cd, i) {
          return h("div", { cls: "cand-row" },
            h("div", { cls: "row" }, plain("#" + (i + 1)),
              plain(cd.minibatch_score === null || cd.minibatch_score === undefined ? "not evaluated" : "minibatch " + num(cd.minibatch_score, 3)),
              cd.demos ? plain("+" + cd.demos + " demo" + (cd.demos === 1 ? "" : "s")) : null,
              cd.why ? h("span", { cls: "meta", text: cd.why }) : null),
            textBlock(cd.instruction, 400));
        })));
    }
    var top = h("div", { cls: "opt-grid" }, plot);
    root.appendChild(top);
    root.appendChild(rounds);
    if (O.diffs.length) {
      var diffs = h("div", { cls: "panel" }, h("h3", { text: "Accepted prompt changes" }));
      O.diffs.forEach(function (d) {
        var box = h("div", { cls: "diff" });
        box.innerHTML = d.html;  // word diff built in Python, every piece escaped
        diffs.appendChild(h("div", { style: "margin-bottom:12px" }, h("div", { cls: "row", style: "margin-bottom:6px" },
          plain("round " + d.round), h("span", { cls: "mono", text: d.predictor || "" }),
          d.demos ? plain("+" + d.demos + " demo" + (d.demos === 1 ? "" : "s") + " from its correct calls") : null), box));
      });
      top.appendChild(diffs);
    } else {
      top.appendChild(h("div", { cls: "panel empty", text: "No prompt change was accepted." }));
    }
  }

  function start() {
    renderSummary();
    renderFilters();
    renderList();
    renderOptimize();
    document.getElementById("foot").textContent = "memtrace-opt report · generated " + D.generated_at + " · " + D.cases.length + " failed questions";
    var m = /case=([^&]+)/.exec(location.hash), n = /node=([^&]+)/.exec(location.hash);
    var wanted = m ? decodeURIComponent(m[1]) : null;
    // a section's id (#optimize, #failures): the first question is shown, the address and the view stay there
    var anchor = !m && location.hash.length > 1 ? document.getElementById(location.hash.slice(1)) : null;
    if (wanted && caseById(wanted)) selectCase(wanted, n ? decodeURIComponent(n[1]) : null);
    else if (D.cases.length) selectCase(visibleCases()[0].id, null, !!anchor);
    else document.getElementById("case-detail").appendChild(h("div", { cls: "panel empty", text: "Every question was answered correctly." }));
    if (anchor) anchor.scrollIntoView();
    document.body.setAttribute("data-ready", "true");
  }
  start();
})();
