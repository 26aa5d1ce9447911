// leasehold's live view: lists leases and endpoints and follows them with
// watches (a streaming list, then changes), as any Kubernetes client does.
'use strict';

const TOKEN_KEY = 'leasehold-token';
const MAX_ROWS = 500; // rows shown per table; filter to see others

const $ = (sel) => document.querySelector(sel);
let token = '';
let clockOffset = 0; // server time minus browser time, from the Date header
let watches = [];

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

function setStatus(text) { $('#status').textContent = text; }

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
        if (resp.status === 401) {
          showError(this.name, `${this.name}: 401 Unauthorized: the server does not accept this token (is it in --token-auth-file?)`);
          return;
        }
        if (resp.status === 403) {
          showError(this.name, `${this.name}: 403 Forbidden: ${msg}`);
          return;
        }
        showError(this.name, `${this.name}: ${resp.status} ${msg}; retrying`);
        await sleep(2000);
        continue;
      }
      showError(this.name, '');
      const date = Date.parse(resp.headers.get('Date'));
      if (!Number.isNaN(date)) clockOffset = date - Date.now();
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

function renderLeases(w) {
  const rows = [];
  const all = sorted(w.items);
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
    if (term.held) until.dataset.end = term.end;
    else until.classList.add('released');
    cell(tr, s.leaseTransitions ?? '', 'transitions');
    cell(tr, s.strategy);
    cell(tr, s.preferredHolder);
    rows.push(tr);
  }
  $('#leases tbody').replaceChildren(...rows);
  $('#leases-count').textContent = count(all.length);
  tick();
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

function duration(ms) {
  let s = Math.round(Math.abs(ms) / 1000);
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

// tick updates the live countdowns, judged by the server's clock.
function tick() {
  const now = Date.now() + clockOffset;
  for (const td of document.querySelectorAll('#leases td.since')) {
    if (td.dataset.renew) {
      td.textContent = duration(now - Number(td.dataset.renew));
      td.classList.remove('none');
    }
  }
  for (const td of document.querySelectorAll('#leases td.until')) {
    if (td.dataset.end === undefined) continue;
    const term = { held: true, end: Number(td.dataset.end) };
    const expired = termExpired(term, now);
    td.classList.remove('none');
    td.classList.toggle('expired', expired);
    td.classList.toggle('live', !expired);
    if (!expired) td.textContent = duration(term.end - now);
    else td.textContent = term.end ? `expired ${duration(now - term.end)} ago` : 'expired (no renewTime or duration)';
  }
}

function start() {
  for (const w of watches) w.stop();
  watches = [];
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
  renderLeases(leases);
  renderEndpoints(endpoints);
  setStatus(`Following ${ns ? 'namespace ' + ns : 'all namespaces'}${labels ? ' with labels ' + labels : ''}; changes show as they happen.`);
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
  start();
});
