// libsw dashboard: per resource, pass / block / would-block / RT per second
// over the last minute, from /api/series (swctl serve), redrawn every second;
// for a keyed table also its totals, its keys and its top keys; for a
// circuit breaker's segment its state, ratio, probes and transitions.
// No library, no build step: canvas and the DOM.
"use strict";

const COLORS = { pass: "#2a8a2a", block: "#c62828", would_block: "#ef8f00", rt: "#1565c0" };
const cards = new Map();

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function card(res) {
  let c = cards.get(res.name);
  if (c) return c;
  const root = el("div", { class: "res", "data-resource": res.name });
  const h = el("h2", {}, res.name + " ");
  const rule = el("span", { class: "rule" });
  h.appendChild(rule);
  const canvas = el("canvas", { width: 900, height: 140 });
  const table = el("table");
  const head = el("tr");
  const row = el("tr", { class: "latest" });
  for (const [field, label, cls] of [["pass", "pass/s", "pass"], ["block", "block/s", "block"],
      ["would_block", "would block/s", "would"], ["success", "ok/s", ""],
      ["exception", "error/s", ""], ["rt", "avg RT ms", "rt"],
      ["concurrency", "in flight", ""]]) {
    head.appendChild(el("th", {}, label));
    row.appendChild(el("td", { "data-field": field, class: cls }, "–"));
  }
  table.appendChild(head);
  table.appendChild(row);
  root.append(h, canvas, table);
  document.getElementById("resources").appendChild(root);
  c = { root, rule, canvas, row, keyed: res.keyed ? keyedPart(root) : null };
  cards.set(res.name, c);
  return c;
}

// A keyed table: its totals since it was created, its keys, its top keys.
const KEYED_FIELDS = [["pass", "pass"], ["block", "block"], ["would_block", "would block"],
  ["success", "ok"], ["exception", "error"], ["keys", "keys"], ["active_keys", "active"],
  ["inserted", "inserted"], ["reclaimed", "reclaimed"], ["evicted", "evicted"],
  ["refused", "refused"], ["capacity", "capacity"]];

function keyedPart(root) {
  const totals = el("table", { class: "keyed-totals" });
  const head = el("tr"), row = el("tr");
  for (const [field, label] of KEYED_FIELDS) {
    head.appendChild(el("th", {}, label));
    row.appendChild(el("td", { "data-field": field }, "–"));
  }
  totals.append(head, row);
  const tops = el("div", { class: "tops" }), lists = {};
  for (const by of ["pass", "block"]) {
    lists[by] = el("table", { class: "top", "data-by": by });
    tops.appendChild(lists[by]);
  }
  root.append(el("h3", {}, "since the table was created"), totals, tops);
  return { row, lists };
}

function renderKeyed(k, keyed) {
  for (const td of k.row.children) td.textContent = String(keyed[td.getAttribute("data-field")]);
  for (const by of ["pass", "block"]) {
    const top = keyed["top_" + by], t = k.lists[by];
    const head = el("tr");
    head.append(el("th", { class: "key" }, "top " + top.length + " by " + (by === "pass" ? "passes" : "blocks")),
      el("th", {}, "pass"), el("th", {}, "block"));
    t.replaceChildren(head);
    for (const key of top) {
      const tr = el("tr", { "data-key": key.key });
      tr.append(el("td", { class: "key" }, key.key),
        el("td", { "data-field": "pass", class: "pass" }, String(key.pass)),
        el("td", { "data-field": "block", class: "block" }, String(key.block)));
      t.appendChild(tr);
    }
  }
}

// Seconds without traffic are absent from the series: give them zeros, so
// the chart shows the whole minute.
function dense(series, now) {
  const by = new Map(series.map(s => [s.t, s]));
  const end = Math.floor(now / 1000) * 1000 - 1000, out = []; // the last whole second
  for (let t = end - 59000; t <= end; t += 1000)
    out.push(by.get(t) || { t, pass: 0, block: 0, would_block: 0, rt: 0 });
  return out;
}

function draw(canvas, series, now) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 24;
  ctx.clearRect(0, 0, w, h);
  const points = dense(series, now);
  let max = 1, maxRt = 1;
  for (const s of points) {
    max = Math.max(max, s.pass, s.block, s.would_block);
    maxRt = Math.max(maxRt, s.rt);
  }
  ctx.strokeStyle = "#eee";
  ctx.fillStyle = "#888";
  ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = pad / 2 + (h - pad) * i / 4;
    ctx.beginPath(); ctx.moveTo(30, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText(String(Math.round(max * (4 - i) / 4)), 0, y + 4);
  }
  const x = i => 30 + (w - 40) * i / (points.length - 1);
  const y = (v, scale) => pad / 2 + (h - pad) * (1 - v / scale);
  const line = (key, scale, color, dash) => {
    ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 2; ctx.setLineDash(dash || []);
    ctx.beginPath();
    points.forEach((s, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, x(i), y(s[key], scale)));
    ctx.stroke();
    ctx.setLineDash([]);
    points.forEach((s, i) => {
      if (s[key] > 0) { ctx.beginPath(); ctx.arc(x(i), y(s[key], scale), 2.5, 0, 2 * Math.PI); ctx.fill(); }
    });
  };
  line("pass", max, COLORS.pass);
  line("block", max, COLORS.block);
  line("would_block", max, COLORS.would_block, [4, 3]);
  line("rt", maxRt, COLORS.rt, [1, 2]);
}

// A circuit breaker's segment: one card, its state and counts now.
const BREAKER_FIELDS = [["state", "state"], ["requests", "requests"], ["bad", "slow or failed"],
  ["ratio", "ratio"], ["next_probe_in_ms", "probe in ms"], ["probes_in_flight", "probing"],
  ["opened", "opened"], ["half_opened", "half-opened"], ["closed", "closed"],
  ["reopened", "reopened"], ["probes", "probes"], ["probes_lost", "lost probes"],
  ["blocked", "blocked"]];
let breakerCard = null;

function renderBreaker(name, b) {
  if (!breakerCard) {
    const root = el("div", { class: "res breaker", "data-breaker": name });
    const h = el("h2", {}, name + " "), rule = el("span", { class: "rule" });
    h.appendChild(rule);
    const table = el("table"), head = el("tr"), row = el("tr", { class: "latest" });
    for (const [field, label] of BREAKER_FIELDS) {
      head.appendChild(el("th", {}, label));
      row.appendChild(el("td", { "data-field": field }, "–"));
    }
    table.append(head, row);
    root.append(h, table);
    document.getElementById("resources").appendChild(root);
    breakerCard = { root, rule, row };
  }
  breakerCard.rule.textContent = "(circuit breaker, " + b.strategy + ")";
  breakerCard.root.setAttribute("data-state", b.state);
  for (const td of breakerCard.row.children) {
    const f = td.getAttribute("data-field");
    td.textContent = f === "ratio" ? b.ratio.toFixed(3) : String(b[f]);
    if (f === "state") td.className = b.state === "closed" ? "pass" : b.state === "open" ? "block" : "would";
  }
}

function render(data) {
  document.getElementById("segment").textContent = data.segment;
  if (data.breaker) {
    document.getElementById("status").textContent =
      "circuit breaker, updated " + new Date(data.now).toLocaleTimeString();
    document.body.setAttribute("data-updated", String(data.now));
    renderBreaker(data.segment, data.breaker);
    return;
  }
  document.getElementById("status").textContent =
    data.resources.length + " resources, updated " + new Date(data.now).toLocaleTimeString();
  document.body.setAttribute("data-updated", String(data.now));
  for (const res of data.resources) {
    const c = card(res);
    c.rule.textContent = "(" + (res.keyed ? "keyed table, " : "") + res.rule + ", limit " +
      res.threshold + (res.keyed ? " per key" : "") + (res.dry_run ? ", dry run" : "") + ")";
    const last = res.series.length ? res.series[res.series.length - 1] : null;
    c.row.setAttribute("data-second", last ? String(last.t) : "");
    // the table shows the last second with traffic
    for (const td of c.row.children) {
      const f = td.getAttribute("data-field");
      const v = f === "concurrency" ? res.concurrency : (last ? last[f] : 0);
      td.textContent = String(v);
    }
    draw(c.canvas, res.series, data.now);
    if (c.keyed) renderKeyed(c.keyed, res.keyed);
  }
}

async function tick() {
  try {
    const r = await fetch("api/series", { cache: "no-store" });
    render(await r.json());
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach swctl: " + e;
  }
}

tick();
setInterval(tick, 1000);
