// emu ui: draws the lab from server-sent events (/events). No libraries.
"use strict";
const NS = "http://www.w3.org/2000/svg";
const HISTORY = 150; // samples kept per port (30 s at 200 ms)
const COLORS = ["#1e88e5", "#8e24aa", "#00897b", "#f4511e", "#3949ab", "#c0ca33", "#6d4c41", "#d81b60"];
const PHASE_COLORS = { compute: "#b0bec5", allreduce: "#1e88e5", reducescatter: "#5e35b1", allgather: "#00897b", push: "#f4511e", pull: "#fb8c00", alltoall: "#8e24aa" };

const state = { topo: null, circuits: null, lastSample: null, hist: {}, portPos: {}, sel: [] };

function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function text(parent, x, y, s, anchor) {
  const t = el("text", { x: x, y: y, "text-anchor": anchor || "middle" }, parent);
  t.textContent = s;
  return t;
}
function title(parent, s) { const t = el("title", {}, parent); t.textContent = s; }
function fmtBps(b) {
  if (b >= 1e9) return (b / 1e9).toFixed(2) + " Gbit/s";
  if (b >= 1e6) return (b / 1e6).toFixed(1) + " Mbit/s";
  if (b >= 1e3) return (b / 1e3).toFixed(1) + " kbit/s";
  return b.toFixed(0) + " bit/s";
}
function circuitName(c) { return c.a + (c.simplex ? "->" : "<->") + c.b; }

// ---- fabric drawing ----
let COL = 150;
const OCS_H = 70, OCS_GAP = 30, TOR_H = 34, SRV_H = 22, LEFT = 20;

function drawFabric() {
  const t = state.topo, svg = document.getElementById("fabric");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  state.portPos = {};
  if (!t) return;
  COL = Math.max(70, Math.min(150, 1240 / Math.max(1, t.racks))); // many racks: narrower columns, the page scrolls
  const width = Math.max(600, LEFT * 2 + t.racks * COL);
  const sw = t.ocs_switches || 0;
  const torY = 20 + sw * (OCS_H + OCS_GAP) + 30;
  const srvY = torY + TOR_H + 30;
  const height = srvY + Math.min(t.servers_per_rack, 4) * (SRV_H + 6) + 20;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  const defs = el("defs", {}, svg);
  const m = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#333" }, m);
  const colX = r => LEFT + r * COL + COL / 2;
  const fibres = el("g", { id: "fibres" }, svg); // behind the boxes
  for (let k = 0; k < sw; k++) {
    const y = 20 + k * (OCS_H + OCS_GAP);
    const g = el("g", { class: "ocsbox", "data-ocs": "ocs" + k }, svg);
    el("rect", { class: "ocs", x: LEFT, y: y, width: width - 2 * LEFT, height: OCS_H, rx: 6 }, g);
    text(g, LEFT + 6, y + 14, "ocs" + k, "start");
  }
  // servers and ToRs
  for (let r = 0; r < t.racks; r++) {
    const x = colX(r);
    const g = el("g", { class: "rack", "data-rack": r }, svg);
    el("rect", { class: "tor", x: x - 55, y: torY, width: 110, height: TOR_H, rx: 4 }, g);
    text(g, x, torY + 21, "tor" + r);
    const shown = Math.min(t.servers_per_rack, 4);
    if (shown > 0) el("line", { class: "fiber", x1: x, y1: torY + TOR_H, x2: x, y2: srvY + (shown - 1) * (SRV_H + 6) }, g);
    for (let s = 0; s < shown; s++) {
      const y = srvY + s * (SRV_H + 6);
      el("rect", { class: "server", x: x - 35, y: y, width: 70, height: SRV_H, rx: 3 }, g);
      text(g, x, y + 15, s === 3 && t.servers_per_rack > 4 ? "+" + (t.servers_per_rack - 3) + " more" : "r" + r + "s" + s);
    }
  }
  // ports: on the OCS box's lower edge, above their ToR; fibres down to the ToR
  const up = Math.max(1, t.uplinks_per_tor);
  for (const p of t.ports || []) {
    const x = colX(p.rack) + (p.uplink - (up - 1) / 2) * Math.min(24, 100 / up);
    const y = 20 + p.ocs * (OCS_H + OCS_GAP) + OCS_H;
    state.portPos[p.name] = { x: x, y: y, ocs: p.ocs };
    el("line", { class: "fiber", x1: x, y1: y, x2: x, y2: torY }, fibres);
  }
  state.circuitLayer = el("g", { id: "circuits" }, svg);
  const portLayer = el("g", { id: "portdots" }, svg);
  for (const p of t.ports || []) {
    const pos = state.portPos[p.name];
    const c = el("circle", { class: "port", cx: pos.x, cy: pos.y, r: 6, "data-port": p.name }, portLayer);
    title(c, p.name + " (ocs" + p.ocs + " port " + p.index + ")");
    c.addEventListener("click", () => pickPort(p.name));
    text(portLayer, pos.x, pos.y + 18, p.name.replace("tor", "")).setAttribute("class", "portlabel");
  }
  drawCircuits();
  buildPortCards();
}

function drawCircuits() {
  const layer = state.circuitLayer;
  if (!layer) return;
  while (layer.firstChild) layer.removeChild(layer.firstChild);
  const cs = (state.circuits && state.circuits.circuits) || [];
  const patched = {};
  cs.forEach((c, i) => {
    const a = state.portPos[c.a], b = state.portPos[c.b];
    if (!a || !b) return;
    patched[c.a] = patched[c.b] = true;
    const h = Math.min(OCS_H - 18, 14 + Math.abs(b.x - a.x) / 6);
    const d = "M" + a.x + "," + a.y + " C" + a.x + "," + (a.y - h) + " " + b.x + "," + (b.y - h) + " " + b.x + "," + b.y;
    const p = el("path", { class: "circuit", d: d, stroke: COLORS[i % COLORS.length], "data-circuit": circuitName(c) }, layer);
    if (c.simplex) p.setAttribute("marker-end", "url(#arrow)");
    title(p, "circuit " + circuitName(c) + " on ocs" + a.ocs);
  });
  document.querySelectorAll("circle.port").forEach(dot => {
    dot.classList.toggle("lit", !!patched[dot.dataset.port]);
  });
  colorDrops();
  const list = document.getElementById("circuitList");
  const un = (state.circuits && state.circuits.unreachable) || [];
  list.textContent = nOf(cs.length, "circuit") + ": " + (cs.map(circuitName).join(", ") || "none") +
    ". " + (un.length ? nOf(un.length, "rack pair") + " unreachable (" + un.slice(0, 6).map(p => p.src + "->" + p.dst).join(", ") + (un.length > 6 ? ", …" : "") + ")." : "Every rack pair has a path.") +
    (state.circuits && state.circuits.schedule_running ? " A schedule is running." : "");
  const t = state.topo;
  document.getElementById("summary").textContent = t ? t.kind + " fabric, " + nOf(t.racks, "rack") + " x " + nOf(t.servers_per_rack, "server") + ", " +
    nOf(t.uplinks_per_tor, "uplink") + " per ToR over " + t.ocs_switches + " OCS, reconfiguration delay " + (t.reconfig_delay_ns / 1e6) + " ms" : "";
}

// nOf is n and the noun, plural unless n is 1 ("1 circuit", "3 circuits").
function nOf(n, noun) {
  return n + " " + noun + (n === 1 ? "" : "s");
}

// ports dropping in the newest sample are orange (dark) or red (unpatched)
function colorDrops() {
  const s = state.lastSample;
  const by = {};
  if (s) for (const p of s.ports) by[p.port] = p;
  document.querySelectorAll("circle.port").forEach(dot => {
    const p = by[dot.dataset.port];
    dot.classList.toggle("dark", !!(p && p.dark_pps > 0));
    dot.classList.toggle("unpatched", !!(p && p.unpatched_pps > 0 && !(p.dark_pps > 0)));
  });
}

// ---- per-port charts ----
function buildPortCards() {
  const box = document.getElementById("ports");
  while (box.firstChild) box.removeChild(box.firstChild);
  for (const p of (state.topo && state.topo.ports) || []) {
    const card = document.createElement("div");
    card.className = "card";
    card.dataset.port = p.name;
    const h = document.createElement("div");
    h.className = "title";
    h.textContent = p.name + " · ocs" + p.ocs;
    card.appendChild(h);
    const svg = el("svg", { class: "chart tputchart", width: 200, height: 46 }, card);
    el("polyline", { class: "tput", points: "" }, svg);
    const svg2 = el("svg", { class: "chart dropchart", width: 200, height: 22 }, card);
    el("polyline", { class: "darkline", points: "" }, svg2);
    el("polyline", { class: "unpline", points: "" }, svg2);
    const nums = document.createElement("div");
    nums.className = "nums";
    nums.textContent = "idle";
    card.appendChild(nums);
    box.appendChild(card);
    if (!state.hist[p.name]) state.hist[p.name] = [];
  }
}

function addSample(s) {
  state.lastSample = s;
  const by = {};
  for (const p of s.ports) by[p.port] = p;
  for (const name in state.hist) {
    const h = state.hist[name];
    const p = by[name] || { bps: 0, dark_pps: 0, unpatched_pps: 0 };
    h.push(p);
    if (h.length > HISTORY) h.shift();
    if (by[name]) { h.darkTotal = p.dark_total; h.unpTotal = p.unpatched_total; }
  }
  colorDrops();
  drawCharts();
}

function points(h, key, w, hgt, max) {
  const n = h.length;
  return h.map((p, i) => ((w * (HISTORY - n + i)) / (HISTORY - 1)).toFixed(1) + "," + (hgt - 1 - (hgt - 2) * Math.min(1, p[key] / max)).toFixed(1)).join(" ");
}

function drawCharts() {
  const rate = (state.topo && state.topo.uplink_bps) || 0;
  document.querySelectorAll("#ports .card").forEach(card => {
    const h = state.hist[card.dataset.port] || [];
    let max = rate;
    if (!max) max = Math.max(1e6, ...h.map(p => p.bps));
    const dmax = Math.max(10, ...h.map(p => Math.max(p.dark_pps, p.unpatched_pps)));
    card.querySelector(".tput").setAttribute("points", points(h, "bps", 200, 46, max));
    card.querySelector(".darkline").setAttribute("points", points(h, "dark_pps", 200, 22, dmax));
    card.querySelector(".unpline").setAttribute("points", points(h, "unpatched_pps", 200, 22, dmax));
    const last = h.length ? h[h.length - 1] : null;
    card.querySelector(".nums").textContent = last ? fmtBps(last.bps) + " · dropped dark " + (h.darkTotal || 0) + " · unpatched " + (h.unpTotal || 0) + " pkts" : "idle";
  });
}

// ---- timeline ----
function drawTimeline(tl) {
  document.getElementById("tlmsg").textContent = tl.message + (tl.dir ? " (" + tl.dir + ")" : "");
  const svg = document.getElementById("timeline");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const jobs = tl.jobs || [];
  const W = 900, L = 90, rowH = 22;
  const H = Math.max(40, 44 + jobs.length * rowH);
  svg.setAttribute("height", H);
  if (!jobs.length) { text(svg, 10, 24, "no phases to show", "start"); return; }
  const span = tl.span_ms || 1;
  const x = ms => L + (W - L - 10) * ms / span;
  jobs.forEach((j, r) => {
    const y = 6 + r * rowH;
    text(svg, L - 6, y + 14, j.job, "end");
    for (const p of j.phases) {
      const rect = el("rect", { class: "phase", x: x(p.start_ms), y: y, width: Math.max(1, x(p.end_ms) - x(p.start_ms)), height: rowH - 4,
        fill: PHASE_COLORS[p.phase] || "#90a4ae", "data-phase": p.phase }, svg);
      title(rect, j.job + " iteration " + p.iteration + " " + p.phase + ": " + p.start_ms.toFixed(1) + "–" + p.end_ms.toFixed(1) + " ms, " + p.ranks + " rank records");
    }
  });
  text(svg, W - 10, H - 24, span.toFixed(0) + " ms", "end");
  // legend: the phases that occur
  const seen = [];
  for (const j of jobs) for (const p of j.phases) if (!seen.includes(p.phase)) seen.push(p.phase);
  seen.forEach((ph, i) => {
    el("rect", { x: L + i * 110, y: H - 14, width: 12, height: 10, fill: PHASE_COLORS[ph] || "#90a4ae" }, svg);
    text(svg, L + i * 110 + 16, H - 5, ph, "start");
  });
}

// ---- changes ----
function pickPort(name) {
  if (!state.topo || !state.topo.allow_changes) return;
  const a = document.getElementById("porta"), b = document.getElementById("portb");
  if (!a.value || (a.value && b.value)) { a.value = name; b.value = ""; } else { b.value = name; }
  document.querySelectorAll("circle.port").forEach(d => d.classList.toggle("sel", d.dataset.port === a.value || d.dataset.port === b.value));
}

async function post(path, body) {
  const out = document.getElementById("changeResult");
  out.className = "";
  out.textContent = "…";
  try {
    // emu ui --allow-changes prints the page's URL with a token in its
    // fragment; the server wants it with every change.
    const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
    const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Emu-Token": token }, body: JSON.stringify(body) });
    const j = await r.json();
    if (!r.ok) { out.className = "err"; out.textContent = j.error || r.statusText; return; }
    out.textContent = "event " + j.seq + ": " + (j.dark ? j.dark.length : 0) + " ports dark for " + (j.delay_ns / 1e6) + " ms";
  } catch (e) { out.className = "err"; out.textContent = String(e); }
}

function setupChanges() {
  document.getElementById("connect").addEventListener("click", () => post("api/connect", {
    a: document.getElementById("porta").value.trim(), b: document.getElementById("portb").value.trim(), simplex: document.getElementById("simplex").checked }));
  document.getElementById("disconnect").addEventListener("click", () => post("api/disconnect", { port: document.getElementById("porta").value.trim() }));
}

// ---- OCS event log ----
function drawEvents(log) {
  const ol = document.getElementById("eventlog");
  while (ol.firstChild) ol.removeChild(ol.firstChild);
  for (const e of log.recent) {
    const li = document.createElement("li");
    li.className = "ev " + e.kind;
    li.textContent = e.at + "  event " + e.seq + " (" + e.kind + "): " + e.text;
    ol.appendChild(li);
  }
  if (!log.recent.length) {
    const li = document.createElement("li");
    li.textContent = "no reconfiguration since this view started";
    ol.appendChild(li);
  }
  document.getElementById("slots").textContent = log.slots ? log.slots + " schedule slots switched since this view started, " + log.late_slots + " late" : "newest first";
}

// ---- event stream ----
function connect() {
  const es = new EventSource("events");
  const status = document.getElementById("status");
  es.addEventListener("topology", e => {
    state.topo = JSON.parse(e.data);
    document.getElementById("lab").textContent = state.topo.lab;
    document.title = "emu ui: " + state.topo.lab;
    document.getElementById("changes").hidden = !state.topo.allow_changes;
    document.getElementById("readonly").hidden = !!state.topo.allow_changes;
    drawFabric();
  });
  es.addEventListener("status", e => {
    const s = JSON.parse(e.data);
    status.textContent = s.message;
    status.className = s.ok ? "ok" : "bad";
  });
  es.addEventListener("circuits", e => { state.circuits = JSON.parse(e.data); drawCircuits(); });
  es.addEventListener("counters", e => addSample(JSON.parse(e.data)));
  es.addEventListener("timeline", e => drawTimeline(JSON.parse(e.data)));
  es.addEventListener("events", e => drawEvents(JSON.parse(e.data)));
  es.onerror = () => { status.textContent = "lost the connection to emu ui; retrying…"; status.className = "bad"; };
}

setupChanges();
connect();
