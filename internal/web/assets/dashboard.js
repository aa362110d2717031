// The dashboard: the server and its nodes (GET /health), rates and
// latencies (GET /metrics), the calibration report with its drift and
// cascades, the shadow report and the spend per key. Without a key (auth
// on) it asks /health and /metrics alone.
import { api, state } from './app.js';
import { h, facts } from './dom.js';
import { parse, histograms, quantile, sum, seriesKey } from './metrics.js';
import { render as renderCalibration } from './calibration.js';
import { renderDrift, renderShadow } from './rollouts.js';
import { renderCascades } from './cascades.js';
import { renderUsage, usagePath } from './usage.js';

const $ = (id) => document.getElementById(id);
const EVERY = 5000;
let timer = null;
let previous = null; // the last scrape: {at, requests: Map}

function ms(seconds) { return Number.isFinite(seconds) ? (seconds * 1000).toFixed(1) : '—'; }

// overall is the server's status as the badge shows it: the fleet's
// (/health's nodes_status: ok, degraded or down) where /health gives it,
// else /health's own status, shown degraded while any node it lists is
// cooling down: never a green ok over a node that is down.
function overall(j) {
  const list = Array.isArray(j.nodes) ? j.nodes : [];
  const down = list.filter((n) => n.healthy === false).length;
  const why = down ? `${down} of ${list.length} nodes cooling down` : '';
  if (j.nodes_status) return { status: j.nodes_status, why };
  if (j.status === 'ok' && down) return { status: 'degraded', why: `${why}; /health says ok` };
  return { status: j.status, why };
}

function serverFacts(health) {
  const j = health.json || {};
  const o = overall(j);
  const badge = h('span', { class: `status ${o.status}`, title: o.why || null }, o.status ?? `no reply (${health.status})`);
  const pairs = [['status', o.why ? [badge, ` ${o.why}`] : badge]];
  if ('version' in j) pairs.push(['version', j.version]);
  if ('auth' in j) pairs.push(['auth', j.auth ? 'on: the API needs a key' : 'off']);
  pairs.push(['paused', 'paused' in j ? (j.paused ? 'yes: decide abstains until system1 toggle on' : 'no') : 'not reported by /health']);
  if (j.pause_problem) pairs.push(['pause problem', j.pause_problem]);
  facts($('server'), pairs);
}

// modelCooldown is a model resting on a node that serves the others.
function modelCooldown(m) {
  return `${m.model} resting until ${new Date(m.until).toLocaleTimeString()}: ${m.reason}`;
}

function nodes(health) {
  const list = health.json?.nodes;
  const body = $('nodes').tBodies[0];
  if (!Array.isArray(list)) {
    body.replaceChildren();
    $('nodes-note').textContent = state.authOn && !state.authorized
      ? 'This server gives callers without a key its status alone; enter a key to see more.'
      : 'This server\'s /health lists no nodes.';
    return;
  }
  $('nodes-note').textContent = list.length ? '' : 'No nodes are configured.';
  body.replaceChildren(...list.map((n) => h('tr', { 'data-node': n.name },
    h('td', {}, n.name), h('td', {}, n.dialect), h('td', {}, (n.models || []).join(', ')), h('td', {}, String(n.priority)),
    h('td', { class: n.healthy ? 'ok' : 'down', 'data-col': 'healthy' }, n.healthy ? 'healthy' : 'cooling down'),
    h('td', { 'data-col': 'in_flight' }, String(n.in_flight)), h('td', { 'data-col': 'queued' }, String(n.queued)),
    h('td', { 'data-col': 'cool_until', title: n.cool_until || '' }, n.cool_until ? new Date(n.cool_until).toLocaleTimeString() : ''),
    h('td', { 'data-col': 'why' }, [n.cool_reason, n.error, ...(n.model_cooldowns || []).map(modelCooldown)].filter(Boolean).join('; ')))));
}

// builds lists the build each node serves under each model, as the
// background probes last saw it (docs/fingerprints.md): a build that
// changed since the server started is marked, since fits learnt on the
// one before no longer apply to its answers.
function builds(health) {
  const rows = [];
  for (const n of health.json?.nodes || []) {
    for (const f of n.fingerprints || []) {
      const changed = f.changes > 0;
      rows.push(h('tr', { 'data-node': n.name, 'data-model': f.model, class: changed ? 'changed' : null },
        h('td', {}, n.name), h('td', {}, f.model), h('td', { 'data-col': 'fingerprint' }, f.fingerprint || 'not known yet'),
        h('td', { 'data-col': 'since', title: f.since || '' }, f.since ? new Date(f.since).toLocaleString() : ''),
        h('td', { 'data-col': 'changes', class: changed ? 'down' : 'ok' }, String(f.changes ?? 0)),
        h('td', { 'data-col': 'change' }, [f.change, f.error].filter(Boolean).join('; '))));
    }
  }
  $('builds').tBodies[0].replaceChildren(...rows);
  const changed = rows.filter((r) => r.classList.contains('changed')).length;
  $('builds-note').textContent = !rows.length
    ? 'No build fingerprinted yet: the background probe reads each model\'s identity and asks its canary.'
    : changed
      ? `${changed} of ${rows.length} builds changed since the server started: fits learnt on the build before no longer apply to their answers until outcomes refit them.`
      : 'Every build is the one first seen.';
}

// page tells the page's own routes, left out of the requests table.
function page(route) { return /^GET \/(\{\$\}|docs|openapi\.json|ui\/)/.test(route); }

// count is a /health node's counter, when /health reports it.
function count(n, field) { return Number.isFinite(n?.[field]) ? n[field] : undefined; }

// metrics fills the request and engine tables from GET /metrics; nodes
// are /health's, whose per-node failovers and cooldowns are preferred
// where it reports them.
function metrics(r, nodes) {
  const routes = $('routes').tBodies[0], engines = $('engines').tBodies[0];
  if (!r.ok) {
    routes.replaceChildren();
    engines.replaceChildren();
    $('metrics-note').textContent = `GET /metrics answered ${r.status}.`;
    $('engines-note').textContent = '';
    return;
  }
  const samples = parse(r.text);
  const now = performance.now();
  const requests = sum(samples, 'system1_requests_total', ['route']);
  const errors = new Map();
  for (const s of samples) {
    if (s.name === 'system1_requests_total' && Number(s.labels.code) >= 400) {
      const k = seriesKey(s.labels, ['route']);
      errors.set(k, (errors.get(k) || 0) + s.value);
    }
  }
  const seconds = (now - (previous?.at ?? now)) / 1000;
  const lat = histograms(samples, 'system1_request_seconds', ['route']);
  const rows = [...lat.values()].filter((hg) => !page(hg.labels.route)).sort((a, b) => b.count - a.count).map((hg) => {
    const k = seriesKey(hg.labels, ['route']);
    const n = requests.get(k) ?? hg.count;
    const before = previous?.requests.get(k) ?? 0;
    const since = n >= before ? n - before : n; // less: the counter was reset
    const rate = previous && seconds > 0 ? (since / seconds).toFixed(2) : '—';
    return h('tr', { 'data-route': hg.labels.route },
      h('td', {}, hg.labels.route), h('td', { 'data-col': 'requests' }, String(n)), h('td', { 'data-col': 'rate' }, rate),
      h('td', { 'data-col': 'errors' }, String(errors.get(k) || 0)),
      h('td', { 'data-col': 'p50' }, ms(quantile(0.5, hg.buckets))), h('td', { 'data-col': 'p90' }, ms(quantile(0.9, hg.buckets))),
      h('td', { 'data-col': 'p99' }, ms(quantile(0.99, hg.buckets))));
  });
  routes.replaceChildren(...rows);
  engines.replaceChildren(...engineRows(samples, nodes));
  if (!engines.rows.length) engines.append(h('tr', {}, h('td', { colspan: 8, class: 'note' }, 'No engine calls yet.')));
  const failovers = [...sum(samples, 'system1_failovers_total', ['model'])].filter(([, v]) => v > 0)
    .map(([k, v]) => `${JSON.parse(k)[0]} ${v}`);
  $('engines-note').textContent = 'Errors are engine calls that did not answer, by how they failed (hover); cooldowns are the times a node was set aside. ' +
    (failovers.length ? `Failovers (questions moved to another node after a failure), by model: ${failovers.join(', ')}.` : 'No question has failed over to another node.');
  $('metrics-note').textContent = (previous
    ? `Percentiles since the server started; rates over the last ${seconds.toFixed(0)} s.`
    : 'Percentiles since the server started; rates appear at the next refresh.') + ' The page\'s own routes are left out.';
  previous = { at: now, requests };
}

// engineRows are the engine table's rows: per node and model, its calls,
// errors and latency from /metrics; per node, its failovers (from /health
// alone: /metrics counts them per model) and cooldowns. A node /health
// lists that has made no call yet still gets a row.
function engineRows(samples, nodes) {
  const byNode = new Map((nodes || []).map((n) => [n.name, n]));
  const failed = new Map();
  for (const s of samples) {
    if (s.name !== 'system1_engine_attempts_total' || s.labels.outcome === 'ok' || !(s.value > 0)) continue;
    const k = seriesKey(s.labels, ['node', 'model']);
    const f = failed.get(k) || { n: 0, how: [] };
    f.n += s.value;
    f.how.push(`${s.labels.outcome} ${s.value}`);
    failed.set(k, f);
  }
  const cooled = sum(samples, 'system1_cooldowns_total', ['node']);
  const row = (node, model, calls, k, p50, p99) => {
    const n = byNode.get(node);
    const f = failed.get(k) || { n: 0, how: [] };
    const failovers = count(n, 'failovers');
    const cooldowns = count(n, 'cooldowns') ?? cooled.get(seriesKey({ node }, ['node'])) ?? 0;
    return h('tr', { 'data-node': node, 'data-model': model },
      h('td', {}, node), h('td', {}, model), h('td', { 'data-col': 'calls' }, String(calls)),
      h('td', { 'data-col': 'errors', title: f.how.join(', ') || null }, String(f.n)),
      h('td', { 'data-col': 'failovers', title: failovers === undefined ? '/health does not report failovers per node' : null }, failovers === undefined ? '—' : String(failovers)),
      h('td', { 'data-col': 'cooldowns' }, String(cooldowns)),
      h('td', { 'data-col': 'p50' }, p50), h('td', { 'data-col': 'p99' }, p99));
  };
  const out = [];
  const seen = new Set();
  for (const hg of histograms(samples, 'system1_engine_seconds', ['node', 'model']).values()) {
    const { node, model } = hg.labels;
    seen.add(node);
    out.push(row(node, model, hg.count, seriesKey(hg.labels, ['node', 'model']), ms(quantile(0.5, hg.buckets)), ms(quantile(0.99, hg.buckets))));
  }
  for (const n of nodes || []) {
    if (!seen.has(n.name)) out.push(row(n.name, (n.models || []).join(', '), 0, seriesKey({ node: n.name, model: '' }, ['node', 'model']), '—', '—'));
  }
  return out;
}

// refresh reads everything the caller may see.
export async function refresh() {
  const health = await api('/health');
  serverFacts(health);
  nodes(health);
  builds(health);
  // /metrics needs no key; the /v1 reports do.
  metrics(await api('/metrics'), health.json?.nodes);
  const allowed = state.authOn === false || state.authorized;
  const calibration = allowed ? await api('/v1/calibration') : null;
  renderCalibration($('calibration'), calibration);
  renderDrift($('drift'), $('drift-note'), calibration);
  renderCascades($('cascades'), $('cascades-note'), calibration);
  renderShadow($('shadow'), $('shadow-note'), allowed ? await api('/v1/shadow') : null);
  renderUsage($('usage'), $('usage-note'), allowed ? await api(usagePath()) : null);
  $('refreshed').textContent = `refreshed ${new Date().toLocaleTimeString()}`;
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

// visible starts the refresh every few seconds while the tab is shown.
export function visible(on) {
  clearInterval(timer);
  timer = on ? setInterval(refresh, EVERY) : null;
}

export function init() {
  $('refresh').addEventListener('click', refresh);
}

