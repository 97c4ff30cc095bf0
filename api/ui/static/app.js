// Weir status page: polls /v1/cluster/stats and /v1/cluster/hot and renders
// them. Behind a tokens file it asks for a read token once and exchanges it
// for an HttpOnly session cookie at /ui/session. Rates are computed here from the change of each member's counters
// between two polls. Every value is written with textContent, never as
// HTML, since keys come from callers.
"use strict";

const REFRESH_MS = 2000;
const HOT_N = 10;
const HISTORY_MS = 5 * 60 * 1000; // what the charts show
const SERIES = ["decisions", "denied", "fallback"];
const SVG = "http://www.w3.org/2000/svg";
let prev = null; // {t: ms, members: {name: MemberStats}}
// history holds one sample per refresh that had rates, oldest first, for
// the last HISTORY_MS: {t: ms, total: {series: rate}, nodes: {name: {series: rate}}}.
// The server keeps none: the charts start when the page opens.
let history = [];

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fmtRate(v) {
  if (v === null || !isFinite(v)) return "–";
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

function setValue(id, v) {
  const e = document.getElementById(id);
  e.textContent = fmtRate(v);
  e.dataset.value = v === null ? "" : String(v);
}

// NeedsLogin marks a refresh that found the node asking for a token: the
// page then shows the sign-in form instead of an error.
class NeedsLogin extends Error {}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  if (r.status === 401) throw new NeedsLogin(path);
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// signIn exchanges a read token for the session cookie (POST /ui/session)
// and refreshes; the token is not kept.
async function signIn(ev) {
  ev.preventDefault();
  const input = document.getElementById("login-token");
  const msg = document.getElementById("login-error");
  msg.hidden = true;
  let r;
  try {
    r = await fetch("/ui/session", {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: input.value.trim() }),
    });
  } catch (e) {
    msg.hidden = false;
    msg.textContent = "sign-in failed: " + e.message;
    return;
  }
  input.value = "";
  if (r.status !== 204) {
    let detail = "HTTP " + r.status;
    try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
    msg.hidden = false;
    msg.textContent = "sign-in refused: " + detail;
    return;
  }
  document.getElementById("login").hidden = true;
  clearTimeout(timer);
  refresh();
}

function rate(now, m, field) {
  if (!prev || !prev.members[m.name] || !m.reachable || !prev.members[m.name].reachable) return null;
  const dt = (now - prev.t) / 1000;
  if (dt <= 0) return null;
  let d;
  if (field === "decisions") {
    d = (m.allowed + m.denied) - (prev.members[m.name].allowed + prev.members[m.name].denied);
  } else {
    d = m[field] - prev.members[m.name][field];
  }
  return Math.max(d, 0) / dt; // a restarted member's counters start again from 0
}

// chartSpan is the time the charts cover, ending now: the time since the
// first sample, at least 30 s, at most HISTORY_MS.
function chartSpan(now) {
  return history.length ? Math.min(HISTORY_MS, Math.max(30000, now - history[0].t)) : 30000;
}

// chart draws series (name -> [[t, v]...]) into svg, scaled to max over
// the chartSpan before now. Each line carries data-n (its points) and
// data-last (its latest value).
function chart(svg, series, now, max) {
  svg.replaceChildren();
  const w = svg.viewBox.baseVal.width, h = svg.viewBox.baseVal.height, span = chartSpan(now);
  for (const name of SERIES) {
    const pts = series[name] || [];
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", "line series-" + name);
    line.setAttribute("points", pts.map(([t, v]) =>
      (w * (1 - (now - t) / span)).toFixed(1) + "," + (h - 2 - (h - 4) * v / max).toFixed(1)).join(" "));
    line.dataset.n = String(pts.length);
    line.dataset.last = pts.length ? String(pts[pts.length - 1][1]) : "";
    svg.append(line);
  }
}

// seriesOf picks, from history, each series of the sample part get returns.
function seriesOf(get) {
  const out = {};
  let max = 0;
  for (const name of SERIES) {
    out[name] = [];
    for (const h of history) {
      const part = get(h);
      if (part && part[name] !== null && part[name] !== undefined) {
        out[name].push([h.t, part[name]]);
        max = Math.max(max, part[name]);
      }
    }
  }
  return { series: out, max: Math.max(max, 1) };
}

function renderCharts(now) {
  const total = seriesOf(h => h.total);
  chart(document.getElementById("chart-total"), total.series, now, total.max);
  document.getElementById("chart-max").textContent = "top of the chart: " + fmtRate(total.max) + "/s";
  const secs = Math.round(chartSpan(now) / 1000);
  document.getElementById("chart-span").textContent = "(per second, all members: the last " +
    (secs < 120 ? secs + " s" : Math.round(secs / 60) + " min") + " this page has seen, up to 5 min)";
  for (const tr of document.querySelectorAll("#members tbody tr")) {
    const node = seriesOf(h => h.nodes[tr.dataset.member]);
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 120 28");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("class", "spark");
    chart(svg, node.series, now, node.max);
    const td = el("td");
    td.append(svg);
    tr.append(td);
  }
}

function renderStats(s, now) {
  document.getElementById("node").textContent = "node " + s.node;
  document.getElementById("epoch").textContent = "ring epoch " + s.epoch;
  document.getElementById("member-count").textContent = String(s.members.length);
  const versions = new Set(s.members.filter(m => m.reachable).map(m => m.limits_version));
  const ve = document.getElementById("versions");
  ve.textContent = [...versions].map(v => "v" + v).join(" ≠ ") || "–";
  ve.className = "value" + (versions.size > 1 ? " mismatch" : "");
  const sample = { t: now, total: {}, nodes: {} };

  const tbody = document.querySelector("#members tbody");
  tbody.replaceChildren();
  const total = { decisions: null, denied: null, fallback: null };
  for (const m of s.members) {
    const tr = el("tr");
    tr.dataset.member = m.name;
    tr.append(el("td", m.name));
    tr.append(el("td", m.reachable ? m.state : m.state + " (unreachable)", "state-" + m.state + (m.reachable ? "" : " unreachable")));
    const share = el("td");
    const bar = el("span", undefined, "share");
    const fill = el("span");
    fill.style.width = (100 * m.ring_share).toFixed(1) + "%";
    bar.append(fill);
    share.append(bar, document.createTextNode((100 * m.ring_share).toFixed(1) + " %"));
    tr.append(share);
    tr.append(el("td", m.reachable ? "v" + m.limits_version : "?", versions.size > 1 ? "mismatch" : ""));
    sample.nodes[m.name] = {};
    for (const f of SERIES) {
      const r = rate(now, m, f);
      if (r !== null) total[f] = (total[f] || 0) + r;
      sample.nodes[m.name][f] = r;
      tr.append(el("td", fmtRate(r), "num"));
    }
    tr.append(el("td", m.reachable ? m.buckets : "?", "num"));
    tr.append(el("td", m.reachable ? m.leases_held : "?", "num"));
    tbody.append(tr);
  }
  setValue("decision-rate", total.decisions);
  setValue("denial-rate", total.denied);
  setValue("fallback-rate", total.fallback);
  sample.total = total;
  if (prev) history.push(sample); // the first poll has no rates
  history = history.filter(h => now - h.t <= HISTORY_MS);
  renderCharts(now);
  const members = {};
  for (const m of s.members) members[m.name] = m;
  prev = { t: now, members };
}

function renderHot(h) {
  const tbody = document.querySelector("#hot tbody");
  tbody.replaceChildren();
  for (const l of h.limits) {
    for (const k of l.keys) {
      const tr = el("tr");
      tr.append(el("td", l.limit), el("td", k.key, "key"), el("td", k.cost, "num"),
        el("td", k.error, "num"), el("td", k.denied, "num"));
      tbody.append(tr);
    }
  }
  const held = document.querySelector("#allotments tbody");
  held.replaceChildren();
  for (const a of h.allotments || []) {
    const tr = el("tr");
    tr.append(el("td", a.limit), el("td", a.key, "key"), el("td", a.owner), el("td", a.holder, "holder"),
      el("td", a.tokens, "num"), el("td", (a.expires_in_ms / 1000).toFixed(1) + " s", "num"));
    held.append(tr);
  }
  document.getElementById("allotments-none").hidden = (h.allotments || []).length > 0;
  const miss = document.getElementById("hot-missing");
  miss.hidden = h.missing.length === 0;
  miss.textContent = h.missing.length ? "not included (unreachable): " + h.missing.join(", ") : "";
}

let timer = null;

async function refresh() {
  const err = document.getElementById("error");
  try {
    const [s, h] = await Promise.all([getJSON("/v1/cluster/stats"), getJSON("/v1/cluster/hot?n=" + HOT_N)]);
    renderStats(s, performance.now());
    renderHot(h);
    err.hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    if (e instanceof NeedsLogin) {
      // Signed out (or the session ended): ask for a token, poll no more.
      document.getElementById("login").hidden = false;
      document.getElementById("node").textContent = "sign-in needed";
      err.hidden = true;
      return;
    }
    err.hidden = false;
    err.textContent = "refresh failed: " + e.message;
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

document.getElementById("login-form").addEventListener("submit", signIn);
refresh();
