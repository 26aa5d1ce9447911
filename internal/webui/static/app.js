// leasehold's live view: lists leases and endpoints and follows them with
// watches (a streaming list, then changes), as any Kubernetes client does.
'use strict';

const TOKEN_KEY = 'leasehold-token';
const MAX_ROWS = 500; // rows shown per table; filter to see others

const $ = (sel) => document.querySelector(sel);
let token = '';
let watches = [];
let following = ''; // what the status says once every watch is ready
let histories = new Map(); // namespace/name -> the server's LeaseHistory
let historyFetch = null; // the pending history request's state

// clock estimates the server's clock minus the browser's from the
// X-Leasehold-Time header (milliseconds) of small requests to /ui/: each
// sample's offset is the server's time minus the midpoint of the request,
// wrong by at most half its round trip, so the sample with the shortest
// round trip of the last few wins (as NTP's clock filter picks).
const clock = { offset: 0, samples: [] };
const CLOCK_SAMPLES = 8;

function addClockSample(sent, received, server) {
  clock.samples.push({ rtt: received - sent, offset: server - (sent + received) / 2 });
  if (clock.samples.length > CLOCK_SAMPLES) clock.samples.shift();
  clock.offset = clock.samples.reduce((a, b) => (b.rtt < a.rtt ? b : a)).offset;
}

async function sampleClock() {
  try {
    const sent = Date.now();
    const resp = await fetch('/ui/', { method: 'HEAD', cache: 'no-store' });
    const received = Date.now();
    const server = Number(resp.headers.get('X-Leasehold-Time'));
    if (resp.ok && server > 0) addClockSample(sent, received, server);
  } catch {
    // Unreachable: the watches say so.
  }
}

async function syncClock(n) {
  for (let i = 0; i < n; i++) await sampleClock();
  tick();
}

function serverNow() { return Date.now() + clock.offset; }

// The token comes from the URL fragment (#token=..., never sent to the
// server) or the form; it lives in this tab's sessionStorage only.
function takeToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

function showError(source, text) {
  let p = document.getElementById('error-' + source);
  if (!text) {
    if (p) p.remove();
    return;
  }
  if (!p) {
    p = document.createElement('p');
    p.id = 'error-' + source;
    $('#errors').append(p);
  }
  p.textContent = text;
}

function setStatus(text, failed) {
  const st = $('#status');
  st.textContent = text;
  st.classList.toggle('failed', !!failed);
}

// updateStatus says what the page does: following once every watch is
// ready, or, prominently, that it cannot, when the server refused one.
function updateStatus() {
  const refused = watches.filter((w) => w.refused);
  if (refused.length) {
    setStatus(`Not following: ${refused.map((w) => w.refused).join('; ')}`, true);
  } else if (watches.length && watches.every((w) => w.ready)) {
    setStatus(following);
  } else if (watches.length) {
    setStatus('Loading…');
  }
}

// A watch of one collection: keeps its objects by namespace/name and calls
// changed after each batch.
class Watch {
  constructor(name, path, labels, changed) {
    this.name = name;
    this.path = path;
    this.labels = labels;
    this.changed = changed;
    this.items = new Map();
    this.abort = new AbortController();
    this.ready = false;
    this.refused = ''; // the server's refusal (401, 403): no retry
  }

  stop() { this.abort.abort(); }

  async run() {
    let rv = '';
    while (!this.abort.signal.aborted) {
      const q = new URLSearchParams({ watch: '1', allowWatchBookmarks: 'true' });
      if (this.labels) q.set('labelSelector', this.labels);
      if (rv) {
        q.set('resourceVersion', rv);
      } else {
        q.set('sendInitialEvents', 'true');
        q.set('resourceVersionMatch', 'NotOlderThan');
        this.items.clear();
        this.ready = false;
        updateStatus();
      }
      let resp;
      try {
        resp = await fetch(this.path + '?' + q, {
          headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
          cache: 'no-store',
          signal: this.abort.signal,
        });
      } catch (e) {
        if (this.abort.signal.aborted) return;
        showError(this.name, `${this.name}: cannot reach the server (${e.message}); retrying`);
        await sleep(2000);
        continue;
      }
      if (!resp.ok) {
        const msg = await statusMessage(resp);
        if (resp.status === 401 || resp.status === 403) {
          this.refused = resp.status === 401
            ? `${this.name}: 401 Unauthorized: the server does not accept this token (is it in --token-auth-file?)`
            : `${this.name}: 403 Forbidden: ${msg}`;
          showError(this.name, this.refused);
          updateStatus();
          return;
        }
        showError(this.name, `${this.name}: ${resp.status} ${msg}; retrying`);
        await sleep(2000);
        continue;
      }
      showError(this.name, '');
      rv = await this.read(resp, rv);
    }
  }

  // read follows one watch response and returns the revision to resume
  // from ('' to list again).
  async read(resp, rv) {
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return rv;
        buf += decoder.decode(value, { stream: true });
        let nl;
        let batch = false;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          const obj = ev.object || {};
          const md = obj.metadata || {};
          switch (ev.type) {
            case 'ERROR':
              // 410: the revision is gone; list again.
              if (obj.code !== 410) showError(this.name, `${this.name}: ${obj.message || 'watch error'}`);
              return '';
            case 'BOOKMARK':
              rv = md.resourceVersion || rv;
              if ((md.annotations || {})['k8s.io/initial-events-end'] === 'true') {
                this.ready = true;
                batch = true;
                updateStatus();
              }
              break;
            case 'DELETED':
              this.items.delete(md.namespace + '/' + md.name);
              rv = md.resourceVersion || rv;
              batch = true;
              break;
            default: // ADDED, MODIFIED
              this.items.set(md.namespace + '/' + md.name, obj);
              rv = md.resourceVersion || rv;
              batch = true;
          }
        }
        if (batch && this.ready) this.changed();
      }
    } catch (e) {
      if (!this.abort.signal.aborted) showError(this.name, `${this.name}: watch interrupted (${e.message}); resuming`);
      return rv;
    }
  }
}

async function statusMessage(resp) {
  try {
    const s = await resp.json();
    return s.message || resp.statusText;
  } catch {
    return resp.statusText;
  }
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

function sorted(items) {
  return [...items.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((e) => e[1]);
}

function cell(tr, text, cls) {
  const td = tr.insertCell();
  if (text === undefined || text === null || text === '') {
    td.textContent = '<none>';
    td.className = 'none';
  } else {
    td.textContent = String(text);
  }
  if (cls) td.classList.add(cls);
  return td;
}

let seenHolders = new Map(); // namespace/name -> holder, to notice changes

function renderLeases(w) {
  const rows = [];
  const all = sorted(w.items);
  let changed = false;
  for (const l of all) {
    const k = l.metadata.namespace + '/' + l.metadata.name;
    const h = (l.spec || {}).holderIdentity || '';
    if (seenHolders.get(k) !== h) {
      seenHolders.set(k, h);
      changed = true;
    }
  }
  if (changed && w.ready) requestHistory();
  for (const l of all.slice(0, MAX_ROWS)) {
    const md = l.metadata;
    const s = l.spec || {};
    const tr = document.createElement('tr');
    tr.dataset.key = md.namespace + '/' + md.name;
    cell(tr, md.namespace);
    cell(tr, md.name);
    cell(tr, s.holderIdentity, 'holder');
    const since = cell(tr, '', 'since');
    const term = leaseTerm(s);
    const until = cell(tr, term.held ? '' : 'released', 'until');
    if (s.renewTime) since.dataset.renew = Date.parse(s.renewTime);
    if (term.held) {
      until.dataset.end = term.end;
      until.dataset.duration = (s.leaseDurationSeconds ?? 0) * 1000;
    } else until.classList.add('released');
    cell(tr, s.leaseTransitions ?? '', 'transitions');
    cell(tr, s.strategy);
    cell(tr, s.preferredHolder);
    renderHistory(tr.insertCell(), histories.get(tr.dataset.key));
    rows.push(tr);
  }
  $('#leases tbody').replaceChildren(...rows);
  $('#leases-count').textContent = count(all.length);
  tick();
}

// renderHistory shows a lease's last holders, oldest first, how long each
// held it and the gaps between them: "alice 2m10s → (gap 14s) → bob 35s".
// Three holders or more within ten minutes mark the lease as flapping.
function renderHistory(td, h) {
  td.replaceChildren();
  td.className = 'history';
  if (!h || !h.holders.length) {
    td.textContent = '<none>';
    td.classList.add('none');
    return;
  }
  const now = serverNow();
  if (h.dropped) td.append('… ');
  h.holders.forEach((t, i) => {
    if (i > 0) {
      const gap = document.createElement('span');
      gap.className = t.gapSeconds >= 1 ? 'gap' : 'handover';
      gap.textContent = t.gapSeconds >= 1 ? ` → (gap ${duration(t.gapSeconds * 1000)}) → ` : ' → ';
      td.append(gap);
    }
    const name = document.createElement('b');
    name.textContent = t.holder;
    const held = document.createElement('span');
    const since = Date.parse(t.since);
    if (i === h.holders.length - 1 && !t.released) {
      held.className = 'current';
      held.dataset.since = since;
      held.textContent = duration(now - since);
    } else {
      held.textContent = duration(Date.parse(t.lastRenew) - since) + (t.released ? ' (released)' : '');
    }
    const tenure = document.createElement('span');
    tenure.className = 'tenure';
    tenure.append(name, ' ', held);
    td.append(tenure);
  });
  const recent = h.holders.filter((t) => now - Date.parse(t.since) < 10 * 60 * 1000).length;
  td.classList.toggle('flapping', recent >= 3);
  td.title = recent >= 3 ? `flapping: ${recent} holders within 10 minutes` : '';
}

// requestHistory fetches the histories of the leases shortly, once for a
// burst of holder changes. The server's history follows the same changes
// as the page's watch, a moment apart, so while it lags behind the watch
// it asks again, a few times.
function requestHistory() {
  const f = historyFetch;
  if (!f || f.timer) return;
  f.tries = 0;
  f.timer = setTimeout(() => loadHistory(f), 100);
}

async function loadHistory(f) {
  const q = f.ns ? '?' + new URLSearchParams({ namespace: f.ns }) : '';
  let list;
  try {
    const resp = await fetch('/leasehold/v1/leasehistory' + q, {
      headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
      cache: 'no-store',
    });
    if (f !== historyFetch) return;
    if (!resp.ok) {
      f.timer = null;
      showError('history', `history: ${resp.status} ${await statusMessage(resp)}`);
      return;
    }
    list = await resp.json();
  } catch (e) {
    f.timer = null;
    if (f === historyFetch) showError('history', `history: cannot reach the server (${e.message})`);
    return;
  }
  if (f !== historyFetch) return;
  f.timer = null;
  showError('history', '');
  histories = new Map(list.leases.map((h) => [h.namespace + '/' + h.name, h]));
  // Only the history cells change: the rest of the rows stay as they are.
  for (const td of document.querySelectorAll('#leases td.history')) {
    renderHistory(td, histories.get(td.parentElement.dataset.key));
  }
  if (historyLags(f.leases, list) && ++f.tries < 5) f.timer = setTimeout(() => loadHistory(f), 400);
}

// historyLags reports whether a held lease's history does not end with
// its holder yet.
function historyLags(w, list) {
  for (const [k, l] of w.items) {
    const holder = (l.spec || {}).holderIdentity;
    if (!holder) continue;
    const h = histories.get(k);
    if (!h) {
      if (!list.untracked) return true;
      continue;
    }
    const last = h.holders[h.holders.length - 1];
    if (!last || last.released || !holder.startsWith(last.holder)) return true;
  }
  return false;
}

function renderEndpoints(w) {
  const rows = [];
  const all = sorted(w.items);
  for (const e of all.slice(0, MAX_ROWS)) {
    const md = e.metadata;
    const tr = document.createElement('tr');
    tr.dataset.key = md.namespace + '/' + md.name;
    const addrs = [];
    const ports = [];
    for (const s of e.subsets || []) {
      for (const a of s.addresses || []) addrs.push(a.ip || a.hostname);
      for (const a of s.notReadyAddresses || []) addrs.push((a.ip || a.hostname) + ' (not ready)');
      for (const p of s.ports || []) ports.push((p.name ? p.name + ' ' : '') + p.port + '/' + (p.protocol || 'TCP'));
    }
    cell(tr, md.namespace);
    cell(tr, md.name);
    cell(tr, addrs.join(', '), 'addresses');
    cell(tr, [...new Set(ports)].join(', '), 'ports');
    rows.push(tr);
  }
  $('#endpoints tbody').replaceChildren(...rows);
  $('#endpoints-count').textContent = count(all.length);
}

function count(n) {
  return n > MAX_ROWS ? `(first ${MAX_ROWS} of ${n}: filter to see the others)` : `(${n})`;
}

// duration formats an interval; a negative one (a time ahead of the
// server's clock) counts as none.
function duration(ms) {
  let s = Math.round(Math.max(0, ms) / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  s %= 60;
  if (h) return `${h}h${String(m).padStart(2, '0')}m`;
  if (m) return `${m}m${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}

// leaseTerm and termExpired mirror Go's lease.TermOf and Term.Expired
// (internal/resources/lease/expiry.go), leasehold's one definition of an
// expired lease, which the table's Expired column and the metrics use:
// keep them in step. A lease without a holder is released, never expired;
// a held one ends at renewTime + leaseDurationSeconds, or has no term
// (end 0) without either, and has expired once its end is not after now.
// Times are in milliseconds since the epoch.
function leaseTerm(spec) {
  if (!spec.holderIdentity) return { held: false, end: 0 };
  if (!spec.renewTime || spec.leaseDurationSeconds == null) return { held: true, end: 0 };
  return { held: true, end: Date.parse(spec.renewTime) + spec.leaseDurationSeconds * 1000 };
}

function termExpired(term, now) { return term.held && !(term.end > now); }

function leaseExpired(spec, now) { return termExpired(leaseTerm(spec), now); }

// countdown is a held lease's "until expiry" at now (the server's time,
// ms): at most its duration (a holder whose clock runs ahead of the
// server's writes renewTimes in the future), "expired … ago" once passed.
function countdown(term, durationMs, now) {
  if (!term.end) return { expired: true, text: 'expired (no renewTime or duration)' };
  if (termExpired(term, now)) return { expired: true, text: `expired ${duration(now - term.end)} ago` };
  return { expired: false, text: duration(Math.min(term.end - now, durationMs)) };
}

// tick updates the live countdowns, judged by the server's clock.
function tick() {
  const now = serverNow();
  for (const td of document.querySelectorAll('#leases td.since')) {
    if (td.dataset.renew) {
      td.textContent = duration(now - Number(td.dataset.renew));
      td.classList.remove('none');
    }
  }
  for (const td of document.querySelectorAll('#leases td.until')) {
    if (td.dataset.end === undefined) continue;
    const c = countdown({ held: true, end: Number(td.dataset.end) }, Number(td.dataset.duration), now);
    td.classList.remove('none');
    td.classList.toggle('expired', c.expired);
    td.classList.toggle('live', !c.expired);
    td.textContent = c.text;
  }
  for (const span of document.querySelectorAll('#leases td.history .current')) {
    span.textContent = duration(now - Number(span.dataset.since));
  }
}

function start() {
  for (const w of watches) w.stop();
  watches = [];
  if (historyFetch && historyFetch.timer) clearTimeout(historyFetch.timer);
  historyFetch = null;
  histories = new Map();
  seenHolders = new Map();
  $('#errors').replaceChildren();
  if (!token) {
    setStatus('Paste a bearer token (a line of the server\'s --token-auth-file) above, or open /ui/#token=TOKEN.');
    renderLeases({ items: new Map() });
    renderEndpoints({ items: new Map() });
    return;
  }
  const ns = $('#ns').value.trim();
  const labels = $('#labels').value.trim();
  const scope = ns ? `/namespaces/${encodeURIComponent(ns)}` : '';
  const pending = new Set();
  const schedule = (render, w) => {
    if (pending.has(w)) return;
    pending.add(w);
    requestAnimationFrame(() => {
      pending.delete(w);
      render(w);
    });
  };
  const leases = new Watch('leases', `/apis/coordination.k8s.io/v1${scope}/leases`, labels, () => schedule(renderLeases, leases));
  const endpoints = new Watch('endpoints', `/api/v1${scope}/endpoints`, labels, () => schedule(renderEndpoints, endpoints));
  watches = [leases, endpoints];
  historyFetch = { leases, ns, timer: null, tries: 0 };
  renderLeases(leases);
  renderEndpoints(endpoints);
  following = `Following ${ns ? 'namespace ' + ns : 'all namespaces'}${labels ? ' with labels ' + labels : ''}; changes show as they happen.`;
  updateStatus();
  for (const w of watches) w.run();
}

document.addEventListener('DOMContentLoaded', () => {
  token = takeToken();
  $('#token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('#token').value.trim();
    if (!t) return;
    token = t;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('#token').value = '';
    start();
  });
  $('#forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    token = '';
    start();
  });
  $('#filters').addEventListener('submit', (e) => {
    e.preventDefault();
    start();
  });
  window.addEventListener('hashchange', () => {
    const t = takeToken();
    if (t && t !== token) {
      token = t;
      start();
    }
  });
  setInterval(tick, 1000);
  // A few samples now, one a minute after: the browser's clock may be
  // stepped.
  syncClock(5);
  setInterval(sampleClock, 60 * 1000);
  start();
});
