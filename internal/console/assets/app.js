// Strata console: a hash-routed page over the JSON API under /ui/api/.
// Every view renders from one fetch and is refreshed every REFRESH ms
// while it is shown (live updates by polling); forms keep their state.
"use strict";

const REFRESH = Number(new URLSearchParams(location.search).get("refresh")) || 2000;
const view = document.getElementById("view");
const live = document.getElementById("live");
let info = { admin: false, adminHere: false, adminReason: "", history: {} };
let timer = null;
let route = "";

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function num(n) { return n == null || n < 0 ? "-" : Number(n).toLocaleString("en-US"); }
function bytes(n) {
  if (n == null) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function dur(s) {
  if (s == null) return "-";
  if (s < 0) return "never (growing)";
  if (s === 0) return "drained";
  if (s < 90) return s.toFixed(0) + " s";
  if (s < 5400) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function ts(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "-"; }

// creds are the signed-in user's basic-auth credentials (base64 of
// "user:password"), kept for this tab only; sent with every request once
// set (admin actions off loopback need them).
let creds = sessionStorage.getItem("strata-console-auth") || "";

async function api(path, opts) {
  opts = opts || {};
  if (creds) opts.headers = Object.assign({ Authorization: "Basic " + creds, "X-Strata-Console": "1" }, opts.headers || {});
  const r = await fetch("api/" + path, opts);
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Strata-Console": "1" }, body: JSON.stringify(body || {}) });
}

// sparkline draws points [{t, lag}] as an SVG polyline over the last hour.
function sparkline(points, w = 160, h = 28) {
  if (!points || points.length < 2) return '<span class="muted">collecting</span>';
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const top = Math.max(1, ...points.map((p) => p.lag));
  const xy = points.map((p) => [((p.t - t0) / Math.max(1, t1 - t0)) * (w - 2) + 1, h - 2 - (p.lag / top) * (h - 4)]);
  const last = points[points.length - 1].lag;
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" data-points="${points.length}" data-last="${last}">` +
    `<polyline fill="none" stroke="#2456c7" stroke-width="1.5" points="${xy.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ")}"/></svg>`;
}

// trendCells are a lag history's cells: its sparkline, growth and time
// to drain (consumer and share groups alike).
function trendCells(trend) {
  const tr = trend || {};
  const growth = tr.growth == null ? "-" : (tr.growth > 0 ? "+" : "") + tr.growth.toFixed(2) + "/s";
  return `<td>${sparkline(tr.points)}</td><td class="num growth ${tr.growth > 0 ? "bad" : tr.growth < 0 ? "good" : ""}">${growth}</td><td class="num">${dur(tr.drain)}</td>`;
}

// ms shows a latency in milliseconds.
function ms(v) { return v == null ? "-" : v < 10 ? v.toFixed(2) + " ms" : v.toFixed(0) + " ms"; }

// raftTable is the per-broker Raft view (/ui/api/raft): each broker's part
// in the metadata quorum, the partition groups it leads and follows, its
// elections and leaderships, and its leaders' commit latency.
function raftTable(r) {
  if (r.error) return `<h2>Raft</h2><div class="err">${esc(r.error)}</div>`;
  const g = (m, k) => num(m ? m[k] : null);
  const lat = (l) => !l || !l.count ? '<span class="muted">none</span>' : `${ms(l.p50Ms)} / ${ms(l.p99Ms)} <span class="muted">(${num(l.count)})</span>`;
  const rows = r.brokers.map((b) => {
    const l = b.local, rc = l && l.recent;
    const role = b.quorum ? `<span class="tag ${b.quorum === "leader" ? "" : "muted"}">${esc(b.quorum)}</span>` : '<span class="muted">-</span>';
    const behind = b.behind > 0 ? ` <span class="warn">${num(b.behind)} behind</span>` : "";
    const seen = b.lastFetchAgoMs >= 0 ? `<span class="muted">${(b.lastFetchAgoMs / 1000).toFixed(1)} s ago</span>` : "";
    const recent = rc ? `${g(rc.elections, "metadata")} / ${g(rc.elections, "partition")} <span class="muted">(${rc.seconds.toFixed(0)} s)</span>` : '<span class="muted">collecting</span>';
    return `<tr data-node="${b.nodeId}"><td>${b.nodeId}${b.nodeId === r.serving ? ' <span class="muted">(this page)</span>' : ""}</td>
      <td class="role">${role}${behind}</td><td>${seen}</td>
      <td class="num leads">${b.leads}</td><td class="num follows">${b.follows}</td>
      <td class="num">${l ? num(l.led) + " / " + num(l.hosted) : "-"}</td><td class="num ${l && l.underReplicated ? "bad" : ""}">${l ? num(l.underReplicated) : "-"}</td>
      <td class="num elections">${l ? g(l.elections, "metadata") + " / " + g(l.elections, "partition") : "-"}</td><td class="num">${l ? recent : "-"}</td>
      <td class="num">${l ? g(l.leaderChanges, "metadata") + " / " + g(l.leaderChanges, "partition") : "-"}</td>
      <td class="num commit">${l ? lat((rc && rc.commit.partition && rc.commit.partition.count ? rc.commit : l.commit).partition) : "-"}</td>
      <td class="num">${l ? lat((rc && rc.commit.metadata && rc.commit.metadata.count ? rc.commit : l.commit).metadata) : "-"}</td>
      <td class="num">${l ? lat(l.heartbeatRound) : "-"}</td><td class="num">${l ? num(l.snapshotInstalls) : "-"}</td>
      <td class="${b.error ? "bad" : "good"} state">${b.error ? esc(b.error) : "reachable"}</td></tr>`;
  }).join("");
  const q = r.quorumError ? `<div class="err">metadata quorum: ${esc(r.quorumError)}</div>` : `<p class="muted">Metadata quorum: leader ${r.quorumLeader}, epoch ${r.quorumEpoch}, committed up to ${num(r.highWatermark)}.</p>`;
  return `<h2>Raft per broker</h2>${q}
    <table id="raft"><tr><th>Node</th><th>Metadata quorum</th><th>Last heard</th><th class="num">Leads</th><th class="num">Follows</th><th class="num">Groups led / hosted</th><th class="num">Under-replicated (led)</th>
    <th class="num">Elections started (metadata / partition)</th><th class="num">Last minute</th><th class="num">Leaderships won</th>
    <th class="num">Commit p50 / p99, partitions</th><th class="num">Commit p50 / p99, metadata</th><th class="num">Heartbeat round p50 / p99</th><th class="num">Snapshot installs</th><th>Console</th></tr>${rows}</table>
    <p class="muted">Leads and follows: partitions, from Metadata. The rest from each broker's own metrics, read from its console (metrics.listener); commit latency over the last minute when there were commits, else since the broker started.</p>`;
}

function card(k, v, cls = "") { return `<div class="card"><div class="k">${esc(k)}</div><div class="v ${cls}">${v}</div></div>`; }

// --- views: each returns {html} from data, and may wire handlers after ---

const views = {
  async cluster() {
    const [c, r] = await Promise.all([api("cluster"), api("raft").catch((e) => ({ error: e.message, brokers: [] }))]);
    const rows = c.brokers.map((b) => `<tr><td>${b.nodeId}${b.controller ? ' <span class="tag">controller</span>' : ""}</td><td>${esc(b.host)}:${b.port}</td><td>${esc(b.rack || "-")}</td><td class="num">${b.leaders}</td><td class="num">${b.replicas}</td></tr>`).join("");
    return `<h1>Cluster <span class="muted">${esc(c.clusterId)}</span></h1>
      <div class="cards">${card("Brokers", c.brokers.length)}${card("Controller", c.controller)}${card("Topics", c.topics)}${card("Partitions", c.partitions)}
      ${card("Under-replicated", c.underReplicated, c.underReplicated ? "bad" : "good")}${card("Offline", c.offline, c.offline ? "bad" : "good")}</div>
      <h2>Brokers</h2><table><tr><th>Node</th><th>Address</th><th>Rack</th><th class="num">Leads (partitions)</th><th class="num">Replicas</th></tr>${rows}</table>
      ${raftTable(r)}`;
  },

  async topics() {
    const ts = await api("topics");
    const rows = ts.map((t) => `<tr><td><a href="#/topic/${encodeURIComponent(t.name)}">${esc(t.name)}</a>${t.internal ? ' <span class="tag">internal</span>' : ""}</td><td class="num">${t.partitions}</td><td class="num">${t.replicationFactor}</td><td class="num">${num(t.records)}</td><td class="num">${bytes(t.bytes)}</td><td class="num ${t.underReplicated ? "bad" : ""}">${t.underReplicated}</td></tr>`).join("");
    return `<h1>Topics</h1><table id="topics"><tr><th>Topic</th><th class="num">Partitions</th><th class="num">RF</th><th class="num">Records</th><th class="num">Size</th><th class="num">Under-replicated</th></tr>${rows}</table>`;
  },

  async topic(name) {
    const t = await api("topics/" + encodeURIComponent(name));
    const parts = t.partitions.map((p) => `<tr><td class="num">${p.partition}</td><td class="num">${p.leader}</td><td class="num">${p.leaderEpoch}</td><td>${p.replicas.join(", ")}</td><td class="${p.isr.length < p.replicas.length ? "bad" : ""}">${p.isr.join(", ")}</td><td class="num">${num(p.start)}</td><td class="num">${num(p.end)}</td><td class="num">${bytes(p.bytes)}</td></tr>`).join("");
    const cfgs = t.configs.map((c) => `<tr><td>${esc(c.name)}</td><td>${c.sensitive ? "(sensitive)" : esc(c.value ?? "")}</td><td><span class="tag">${esc(c.source)}</span></td></tr>`).join("");
    return `<h1>Topic ${esc(t.name)} <span class="muted">${esc(t.id)}</span></h1>
      <h2>Partitions</h2><table id="partitions"><tr><th class="num">Partition</th><th class="num">Leader</th><th class="num">Epoch</th><th>Replicas</th><th>ISR</th><th class="num">Start</th><th class="num">End</th><th class="num">Size</th></tr>${parts}</table>
      <h2>Records</h2><div id="browser" data-static="1"></div>
      <h2>Configs</h2><table><tr><th>Name</th><th>Value</th><th>Source</th></tr>${cfgs}</table>`;
  },

  async groups() {
    const gs = await api("groups");
    const rows = gs.map((g) => {
      const href = g.type === "share" ? "#/share/" : "#/group/";
      return `<tr><td><a href="${href}${encodeURIComponent(g.group)}">${esc(g.group)}</a></td><td>${esc(g.type)}</td><td>${esc(g.state)}</td><td class="num">${g.members}</td><td class="num">${num(g.lag)}</td></tr>`;
    }).join("");
    return `<h1>Groups</h1><table id="groups"><tr><th>Group</th><th>Type</th><th>State</th><th class="num">Members</th><th class="num">Lag</th></tr>${rows}</table>`;
  },

  async group(name) {
    const g = await api("groups/" + encodeURIComponent(name));
    const members = g.members.map((m) => `<tr><td>${esc(m.clientId)}</td><td>${esc(m.memberId)}</td><td>${esc(m.clientHost)}</td><td>${Object.entries(m.assignment).map(([t, ps]) => esc(t) + " [" + ps.join(", ") + "]").join("; ")}</td></tr>`).join("");
    const parts = g.partitions.map((p) => `<tr data-tp="${esc(p.topic)}/${p.partition}"><td>${esc(p.topic)}</td><td class="num">${p.partition}</td><td class="num">${num(p.committed)}</td><td class="num">${num(p.end)}</td><td class="num lag">${num(p.lag)}</td>${trendCells(p.trend)}<td class="muted">${esc(p.member || "")}</td></tr>`).join("");
    return `<h1>Consumer group ${esc(g.group)}</h1>
      <div class="cards">${card("State", esc(g.state))}${card("Members", g.members.length)}${card("Total lag", num(g.lag), g.lag > 0 ? "warn" : "good")}${card("Assignor", esc(g.protocol || "-"))}</div>
      <h2>Lag per partition <span class="muted">(sparkline: the last hour)</span></h2>
      <table id="lag"><tr><th>Topic</th><th class="num">Partition</th><th class="num">Committed</th><th class="num">End</th><th class="num">Lag</th><th>Last hour</th><th class="num">Growth</th><th class="num">Time to drain</th><th>Member</th></tr>${parts}</table>
      <h2>Members</h2><table><tr><th>Client ID</th><th>Member ID</th><th>Host</th><th>Assignment</th></tr>${members}</table>
      <div id="admin" data-static="1"></div>`;
  },

  async share(name) {
    const s = await api("share-groups/" + encodeURIComponent(name));
    const kv = (o) => Object.entries(o || {}).map(([k, v]) => `${esc(k)} ${num(v)}`).join(", ") || "-";
    const parts = s.partitions.map((p) => `<tr data-tp="${esc(p.topic)}/${p.partition}"><td>${esc(p.topic)}</td><td class="num">${p.partition}</td><td class="num">${num(p.startOffset)}</td><td class="num lag">${num(p.lag)}</td>${trendCells(p.trend)}<td class="num">${p.inFlight == null ? "-" : num(p.inFlight)}</td><td>${kv(p.acknowledged)}</td><td>${kv(p.archived)}</td></tr>`).join("");
    const letters = s.deadLetters.map((d) => `<tr><td><span class="tag bad">${esc(d.reason || "?")}</span></td><td>${esc(d.message)}</td><td>${esc(d.source)}</td><td class="num">${esc(d.deliveryCount)}</td><td>${ts(d.timestamp)}</td><td><pre>${esc(d.value.isText ? d.value.text : d.value.hex)}</pre></td><td class="num">${d.partition}@${d.offset}</td></tr>`).join("");
    const members = s.members.map((m) => `<tr><td>${esc(m.clientId)}</td><td>${esc(m.memberId)}</td><td>${esc(m.clientHost)}</td><td>${Object.entries(m.assignment).map(([t, ps]) => esc(t) + " [" + ps.join(", ") + "]").join("; ")}</td></tr>`).join("");
    return `<h1>Share group ${esc(s.group)}</h1>
      <div class="cards">${card("State", esc(s.state || "-"))}${card("Members", s.members.length)}${card("Delivery", s.paused ? "PAUSED" : "running", s.paused ? "bad" : "good")}${card("Dead-letter topic", esc(s.dlqTopic || "none"))}${card("Dead letters shown", s.deadLetters.length, s.deadLetters.length ? "bad" : "")}</div>
      ${s.note ? `<div class="err">${esc(s.note)}</div>` : ""}
      <h2>Partitions <span class="muted">(sparkline: the last hour of lag)</span></h2><table id="sharelag"><tr><th>Topic</th><th class="num">Partition</th><th class="num">Start offset</th><th class="num">Lag</th><th>Last hour</th><th class="num">Growth</th><th class="num">Time to drain</th><th class="num">In flight</th><th>Acknowledged</th><th>Archived</th></tr>${parts}</table>
      <h2>Dead letters <span class="muted">(newest first, from ${esc(s.dlqTopic || "-")})</span></h2>
      <table id="letters"><tr><th>Reason</th><th>Message</th><th>Source record</th><th class="num">Deliveries</th><th>Time</th><th>Value</th><th class="num">Letter</th></tr>${letters}</table>
      <h2>Members</h2><table><tr><th>Client ID</th><th>Member ID</th><th>Host</th><th>Assignment</th></tr>${members}</table>
      <div id="admin" data-static="1" data-paused="${s.paused ? 1 : 0}"></div>`;
  },
};

// --- static parts: forms that must survive refreshes ---

function recordBrowser(el, topic, partitions) {
  el.innerHTML = `<form class="inline" id="browse">
      <label>Partition <select name="partition">${partitions.map((p) => `<option>${p}</option>`).join("")}</select></label>
      <label>From <select name="by"><option value="offset">offset</option><option value="timestamp">timestamp (ms or ISO)</option><option value="last">the last N</option></select></label>
      <label>Value <input name="at" value="0" size="16"></label>
      <label>Limit <input name="limit" value="50" size="4"></label>
      <label>Show as <select name="as"><option value="auto">text / JSON</option><option value="hex">hex</option></select></label>
      <button type="submit">Read</button></form><div id="records"></div>`;
  const form = el.querySelector("form");
  const load = async () => {
    const f = new FormData(form);
    const q = new URLSearchParams({ partition: f.get("partition"), limit: f.get("limit") });
    const at = String(f.get("at")).trim();
    if (f.get("by") === "timestamp") q.set("timestamp", /^\d+$/.test(at) ? at : String(Date.parse(at)));
    else if (f.get("by") === "last") q.set("offset", "-" + (at || f.get("limit")));
    else q.set("offset", at || "0");
    const out = el.querySelector("#records");
    try {
      const r = await api("topics/" + encodeURIComponent(topic) + "/records?" + q);
      const show = (b) => b.null ? '<span class="muted">null</span>' : `<pre>${esc(f.get("as") === "hex" ? b.hex : (b.json || (b.isText ? b.text : b.hex)))}</pre>${b.truncated ? '<span class="muted">(first 4 KiB)</span>' : ""}`;
      out.innerHTML = `<p class="muted">${r.records.length} record(s) from offset ${r.from} (partition ${r.partition}: start ${r.start}, end ${r.end})</p>
        <table id="recordtable"><tr><th class="num">Offset</th><th>Timestamp</th><th>Key</th><th>Value</th><th>Headers</th></tr>${r.records.map((x) => `<tr><td class="num">${x.offset}</td><td>${ts(x.timestamp)}</td><td>${show(x.key)}</td><td>${show(x.value)}</td><td>${x.headers.map((h) => `<div><b>${esc(h.key)}</b>: ${show(h.value)}</div>`).join("")}</td></tr>`).join("")}</table>`;
    } catch (e) {
      out.innerHTML = `<div class="err">${esc(e.message)}</div>`;
    }
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
  load();
}

function showMode() {
  document.getElementById("mode").textContent = info.admin ? (info.adminHere ? "admin" + (info.principal ? " as " + info.principal : "") : "read-only here") : "read-only";
}

// signIn asks for a SCRAM user's name and password (admin actions off
// loopback), checks them with /ui/api/info and, when they are good, keeps
// them for this tab and shows the admin panel.
function signIn(el, kind, name) {
  el.innerHTML = `<h2>Admin</h2><p class="muted">${esc(info.adminReason)}</p>
    <form class="inline" id="signin"><label>User <input name="user" autocomplete="username" size="16"></label>
    <label>Password <input name="password" type="password" autocomplete="current-password" size="16"></label>
    <button type="submit">Sign in</button></form><div id="signinout"></div>`;
  const form = el.querySelector("#signin");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    creds = btoa(String.fromCharCode(...new TextEncoder().encode(f.get("user") + ":" + f.get("password"))));
    try { info = await api("info"); } catch (err) { info.adminHere = false; info.adminReason = err.message; }
    if (info.adminHere) {
      sessionStorage.setItem("strata-console-auth", creds);
      showMode();
      adminPanel(el, kind, name);
      return;
    }
    creds = "";
    el.querySelector("#signinout").innerHTML = `<div class="err">${esc(info.adminReason)}</div>`;
  });
}

function adminPanel(el, kind, name) {
  if (!info.admin) { el.innerHTML = `<p class="muted">Read-only: admin actions are off (strata.console.admin.enable).</p>`; return; }
  if (!info.adminHere && info.signIn) { signIn(el, kind, name); return; }
  if (!info.adminHere) { el.innerHTML = `<p class="muted">${esc(info.adminReason)}</p>`; return; }
  const out = '<div id="actionout"></div>';
  if (kind === "group") {
    el.innerHTML = `<h2>Admin</h2><form class="inline" id="reset">
      <label>Topic <input name="topic" size="16"></label>
      <label>Reset to <select name="kind"><option value="earliest">earliest</option><option value="latest">latest</option><option value="offset">offset N</option><option value="shift">shift by N</option><option value="datetime">datetime</option></select></label>
      <label>N / time <input name="arg" size="18"></label>
      <button type="submit">Plan (dry run)</button></form>
      <button class="danger" id="delete">Delete this group</button>${out}`;
    const form = el.querySelector("#reset");
    const to = () => { const f = new FormData(form); const k = f.get("kind"); return k === "earliest" || k === "latest" ? k : k + ":" + f.get("arg"); };
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const topic = new FormData(form).get("topic");
      const o = el.querySelector("#actionout");
      try {
        const plan = await post("groups/" + encodeURIComponent(name) + "/reset-offsets", { topic, to: to(), execute: false });
        o.innerHTML = `<div class="plan"><pre>${esc(plan.output)}</pre><button class="danger" id="confirm">Apply this plan</button></div>`;
        o.querySelector("#confirm").addEventListener("click", async () => {
          try { const r = await post("groups/" + encodeURIComponent(name) + "/reset-offsets", { topic, to: to(), execute: true }); o.innerHTML = `<div class="plan"><pre>${esc(r.output)}</pre></div>`; }
          catch (err) { o.innerHTML = `<div class="err">${esc(err.message)}</div>`; }
        });
      } catch (err) { o.innerHTML = `<div class="err">${esc(err.message)}</div>`; }
    });
    el.querySelector("#delete").addEventListener("click", () => confirmThen(el, `Delete consumer group ${name}?`, () => post("groups/" + encodeURIComponent(name) + "/delete", { share: false })));
  } else {
    el.innerHTML = `<h2>Admin</h2>${info.redrive ? `<form class="inline" id="redrive">
      <label>Redrive dead letters of reason <select name="reason"><option value="">all</option><option>max-deliveries</option><option>rejected</option><option>ttl-expired</option><option>redrive-limit</option><option>topic-deleted</option><option>other</option></select></label>
      <button type="submit">Plan redrive (dry run)</button></form>` : ""}
      <button id="resume">Resume delivery (lift the flood guard's pause)</button> <button class="danger" id="delete">Delete this share group</button>${out}`;
    const rf = el.querySelector("#redrive");
    if (rf) rf.addEventListener("submit", async (e) => {
      e.preventDefault();
      const reason = new FormData(rf).get("reason");
      const o = el.querySelector("#actionout");
      try {
        const plan = await post("share-groups/" + encodeURIComponent(name) + "/redrive", { reason, execute: false });
        o.innerHTML = `<div class="plan" id="redriveplan"><pre>${esc(plan.output)}</pre><button class="danger" id="confirm">Redrive these letters</button></div>`;
        o.querySelector("#confirm").addEventListener("click", async () => {
          try { const r = await post("share-groups/" + encodeURIComponent(name) + "/redrive", { reason, execute: true }); o.innerHTML = `<div class="plan" id="redrivedone"><pre>${esc(r.output)}</pre></div>`; }
          catch (err) { o.innerHTML = `<div class="err">${esc(err.message)}</div>`; }
        });
      } catch (err) { o.innerHTML = `<div class="err">${esc(err.message)}</div>`; }
    });
    el.querySelector("#resume").addEventListener("click", () => confirmThen(el, `Resume share group ${name}?`, () => post("share-groups/" + encodeURIComponent(name) + "/resume")));
    el.querySelector("#delete").addEventListener("click", () => confirmThen(el, `Delete share group ${name}?`, () => post("groups/" + encodeURIComponent(name) + "/delete", { share: true })));
  }
}

function confirmThen(el, question, action) {
  const o = el.querySelector("#actionout");
  o.innerHTML = `<div class="plan">${esc(question)} <button class="danger" id="yes">Confirm</button> <button id="no">Cancel</button></div>`;
  o.querySelector("#no").addEventListener("click", () => { o.innerHTML = ""; });
  o.querySelector("#yes").addEventListener("click", async () => {
    try { const r = await action(); o.innerHTML = `<div class="plan"><pre>${esc(r.output)}</pre></div>`; }
    catch (err) { o.innerHTML = `<div class="err">${esc(err.message)}</div>`; }
  });
}

// --- routing and refresh ---

function parseRoute() {
  const parts = (location.hash.replace(/^#\/?/, "") || "cluster").split("/");
  return { name: parts[0], arg: parts.slice(1).map(decodeURIComponent).join("/") };
}

async function render(first) {
  const r = parseRoute();
  const fn = views[r.name] || views.cluster;
  const key = r.name + "/" + r.arg;
  try {
    const html = await fn(r.arg);
    if (key !== route && !first) return; // navigated away meanwhile
    // Keep static parts (forms, the records page) across refreshes.
    const kept = {};
    view.querySelectorAll("[data-static]").forEach((el) => { kept[el.id] = el; });
    view.innerHTML = html;
    for (const [id, el] of Object.entries(kept)) {
      const slot = view.querySelector("#" + id);
      if (slot) slot.replaceWith(el);
    }
    if (first) wire(r);
    live.className = "live ok";
    live.textContent = "live " + new Date().toLocaleTimeString();
    document.getElementById("status").textContent = `lag history: ${info.history.series} of ${info.history.maxSeries} series, ~${bytes(info.history.bytes)}, a sample every ${info.history.sampleEverySeconds} s`;
  } catch (e) {
    live.className = "live err";
    live.textContent = "error";
    if (first) view.innerHTML = `<div class="err">${esc(e.message)}</div>`;
  }
}

function wire(r) {
  if (r.name === "topic") {
    const ps = [...view.querySelectorAll("#partitions tr td:first-child")].map((td) => td.textContent);
    recordBrowser(view.querySelector("#browser"), r.arg, ps);
  }
  if (r.name === "group") adminPanel(view.querySelector("#admin"), "group", r.arg);
  if (r.name === "share") adminPanel(view.querySelector("#admin"), "share", r.arg);
}

async function navigate() {
  clearTimeout(timer);
  const r = parseRoute();
  route = r.name + "/" + r.arg;
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === r.name || (a.dataset.nav === "groups" && (r.name === "group" || r.name === "share")) || (a.dataset.nav === "topics" && r.name === "topic")));
  view.innerHTML = '<p class="muted">loading</p>';
  await render(true);
  schedule(route);
}

function schedule(key) {
  timer = setTimeout(async () => {
    if (key !== route) return;
    try { info = await api("info"); } catch (e) { /* shown by render */ }
    await render(false);
    schedule(key);
  }, REFRESH);
}

(async () => {
  try { info = await api("info"); } catch (e) { /* shown by render */ }
  showMode();
  window.addEventListener("hashchange", navigate);
  navigate();
})();
