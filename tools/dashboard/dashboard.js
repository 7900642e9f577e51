// SPDX-License-Identifier: Apache-2.0
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

// A card per resource of a segment: names repeat across segments.
function card(res, several) {
  const id = res.segment + "\u0000" + res.name;
  let c = cards.get(id);
  if (c) return c;
  const root = el("div", { class: "res", "data-resource": res.name, "data-segment": res.segment });
  const h = el("h2", {}, (several ? res.segment + " / " : "") + res.name + " ");
  const rule = el("span", { class: "rule" });
  const dry = el("span", { class: "dry-run", title: "counts what it would block, blocks nothing" },
    "dry run");
  h.append(rule, " ", dry);
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
  c = { root, rule, dry, canvas, row, keyed: res.keyed ? keyedPart(root) : null };
  cards.set(id, c);
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

// Y-axis ticks from 0 to at least max: a whole step of 1, 2 or 5 times a
// power of ten, so that no two labels are the same once printed.
function ticks(max) {
  const raw = Math.max(max, 1) / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(1, [1, 2, 5, 10].map(m => m * p).find(s => s >= raw));
  const out = [];
  for (let v = 0; out.length === 0 || out[out.length - 1] < max; v += step) out.push(v);
  return out;
}

const pad2 = n => String(n).padStart(2, "0");
// A wall-clock time of the axis: HH:MM:SS, local time.
function clock(t) {
  const d = new Date(t);
  return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
}

function draw(canvas, series, now) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 40, top = 8, bottom = 22;
  ctx.clearRect(0, 0, w, h);
  const points = dense(series, now);
  let max = 1, maxRt = 1;
  for (const s of points) {
    max = Math.max(max, s.pass, s.block, s.would_block);
    maxRt = Math.max(maxRt, s.rt);
  }
  const ys = ticks(max), scale = ys[ys.length - 1];
  const y = (v, sc) => top + (h - top - bottom) * (1 - v / sc);
  const x = i => left + (w - left - 10) * i / (points.length - 1);
  ctx.strokeStyle = "#eee";
  ctx.fillStyle = "#888";
  ctx.font = "11px sans-serif";
  ctx.textAlign = "right";
  for (const v of ys) {
    ctx.beginPath(); ctx.moveTo(left, y(v, scale)); ctx.lineTo(w, y(v, scale)); ctx.stroke();
    ctx.fillText(String(v), left - 6, y(v, scale) + 4);
  }
  // the time axis: a label every 15 s, on whole quarters of a minute
  ctx.textAlign = "center";
  const xs = [];
  points.forEach((s, i) => {
    if (s.t % 15000 !== 0) return;
    xs.push(clock(s.t));
    ctx.beginPath(); ctx.moveTo(x(i), top); ctx.lineTo(x(i), h - bottom); ctx.stroke();
    ctx.fillText(clock(s.t), x(i), h - 6);
  });
  ctx.textAlign = "start";
  // what is drawn, for tests and for screen readers
  canvas.setAttribute("data-yticks", ys.join(" "));
  canvas.setAttribute("data-xticks", xs.join(" "));
  canvas.setAttribute("aria-label", "per second from " + clock(points[0].t) + " to " +
    clock(points[points.length - 1].t) + ", up to " + scale);
  const line = (key, sc, color, dash) => {
    ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 2; ctx.setLineDash(dash || []);
    ctx.beginPath();
    points.forEach((s, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, x(i), y(s[key], sc)));
    ctx.stroke();
    ctx.setLineDash([]);
    points.forEach((s, i) => {
      if (s[key] > 0) { ctx.beginPath(); ctx.arc(x(i), y(s[key], sc), 2.5, 0, 2 * Math.PI); ctx.fill(); }
    });
  };
  line("pass", scale, COLORS.pass);
  line("block", scale, COLORS.block);
  line("would_block", scale, COLORS.would_block, [4, 3]);
  line("rt", maxRt, COLORS.rt, [1, 2]);
}

// A circuit breaker's segment: a card each, its state and counts now.
const BREAKER_FIELDS = [["state", "state"], ["requests", "requests"], ["bad", "slow or failed"],
  ["ratio", "ratio"], ["next_probe_in_ms", "probe in ms"], ["probes_in_flight", "probing"],
  ["opened", "opened"], ["half_opened", "half-opened"], ["closed", "closed"],
  ["reopened", "reopened"], ["probes", "probes"], ["probes_lost", "lost probes"],
  ["blocked", "blocked"]];
const breakerCards = new Map(); // by segment

function renderBreaker(name, b) {
  let breakerCard = breakerCards.get(name);
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
    breakerCards.set(name, breakerCard);
  }
  breakerCard.rule.textContent = "(circuit breaker, " + b.strategy + ")";
  breakerCard.root.setAttribute("data-state", b.state);
  for (const td of breakerCard.row.children) {
    const f = td.getAttribute("data-field");
    td.textContent = f === "ratio" ? b.ratio.toFixed(3) : String(b[f]);
    if (f === "state") td.className = b.state === "closed" ? "pass" : b.state === "open" ? "block" : "would";
  }
  return breakerCard;
}

// Filter and sort: from the page's controls, which start from the address
// (?filter=TEXT&sort=name|pass|block|dry_run) so that a view can be shared.
const SORTS = {
  name: (a, b) => (a.segment + "/" + a.name).localeCompare(b.segment + "/" + b.name),
  pass: (a, b) => b.minute.pass - a.minute.pass,
  block: (a, b) => b.minute.block - a.minute.block,
  dry_run: (a, b) => b.dry_run - a.dry_run,
};

function controls() {
  const q = new URLSearchParams(location.search);
  const f = document.getElementById("filter"), s = document.getElementById("sort");
  f.value = q.get("filter") || "";
  if (SORTS[q.get("sort")]) s.value = q.get("sort");
  const again = () => { if (last) render(last); };
  f.addEventListener("input", again);
  s.addEventListener("change", again);
}

// The last minute's totals of a resource (the sort keys).
function minute(res) {
  const m = { pass: 0, block: 0 };
  for (const s of res.series) { m.pass += s.pass; m.block += s.block; }
  return m;
}

let last = null;
function render(data) {
  last = data;
  const several = data.segments.length > 1;
  document.getElementById("segment").textContent = data.segments.join(", ");
  const filter = document.getElementById("filter").value.trim().toLowerCase();
  const sort = SORTS[document.getElementById("sort").value] || SORTS.name;
  const list = data.resources.map(res => Object.assign({ minute: minute(res) }, res)).sort(sort);
  let shown = 0;
  const parent = document.getElementById("resources");
  for (const res of list) {
    const c = card(res, several);
    const match = !filter || (res.segment + " / " + res.name).toLowerCase().includes(filter);
    c.root.hidden = !match;
    parent.appendChild(c.root); // in the sorted order
    if (!match) continue;
    shown++;
    c.rule.textContent = "(" + (res.keyed ? "keyed table, " : "") + res.rule + ", limit " +
      res.threshold + (res.keyed ? " per key" : "") + ")";
    c.dry.hidden = !res.dry_run;
    c.root.classList.toggle("dry", !!res.dry_run);
    const lastSecond = res.series.length ? res.series[res.series.length - 1] : null;
    c.row.setAttribute("data-second", lastSecond ? String(lastSecond.t) : "");
    // the table shows the last second with traffic
    for (const td of c.row.children) {
      const f = td.getAttribute("data-field");
      const v = f === "concurrency" ? res.concurrency : (lastSecond ? lastSecond[f] : 0);
      td.textContent = String(v);
    }
    draw(c.canvas, res.series, data.now);
    if (c.keyed) renderKeyed(c.keyed, res.keyed);
  }
  for (const b of data.breakers || [])
    renderBreaker(b.segment, b).root.hidden = !!filter && !b.segment.toLowerCase().includes(filter);
  document.getElementById("status").textContent =
    (shown === list.length ? list.length : shown + " of " + list.length) + " resources in " +
    data.segments.length + " segment" + (several ? "s" : "") + ", updated " + clock(data.now);
  document.body.setAttribute("data-updated", String(data.now));
}

async function tick() {
  try {
    const r = await fetch("api/series", { cache: "no-store" });
    render(await r.json());
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach swctl: " + e;
  }
}

controls();
tick();
setInterval(tick, 1000);
