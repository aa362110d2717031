// The dashboard: the server and its nodes from GET /health, request rates
// and latency percentiles from GET /metrics, and the calibration report.
// Without a key (auth on) it shows /health alone, as a caller without a
// key sees it, and asks for nothing else.
import { api, state } from './app.js';
import { h, facts } from './dom.js';
import { parse, histograms, quantile, sum, seriesKey } from './metrics.js';
import { render as renderCalibration } from './calibration.js';

const $ = (id) => document.getElementById(id);
const EVERY = 5000;
let timer = null;
let previous = null; // the last scrape: {at, requests: Map}

function ms(seconds) { return Number.isFinite(seconds) ? (seconds * 1000).toFixed(1) : '—'; }

function serverFacts(health) {
  const j = health.json || {};
  const pairs = [['status', h('span', { class: `status ${j.status}` }, j.status ?? `no reply (${health.status})`)]];
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

// page tells the page's own routes, left out of the requests table.
function page(route) { return /^GET \/(\{\$\}|docs|openapi\.json|ui\/)/.test(route); }

function metrics(r) {
  const routes = $('routes').tBodies[0], engines = $('engines').tBodies[0];
  if (!r || !r.ok) {
    routes.replaceChildren();
    engines.replaceChildren();
    $('metrics-note').textContent = !r ? 'Metrics need a key.' : `GET /metrics answered ${r.status}.`;
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
    const rate = previous && seconds > 0 ? ((n - before) / seconds).toFixed(2) : '—';
    return h('tr', { 'data-route': hg.labels.route },
      h('td', {}, hg.labels.route), h('td', { 'data-col': 'requests' }, String(n)), h('td', { 'data-col': 'rate' }, rate),
      h('td', { 'data-col': 'errors' }, String(errors.get(k) || 0)),
      h('td', { 'data-col': 'p50' }, ms(quantile(0.5, hg.buckets))), h('td', { 'data-col': 'p90' }, ms(quantile(0.9, hg.buckets))),
      h('td', { 'data-col': 'p99' }, ms(quantile(0.99, hg.buckets))));
  });
  routes.replaceChildren(...rows);
  const eng = histograms(samples, 'system1_engine_seconds', ['node', 'model']);
  engines.replaceChildren(...[...eng.values()].map((hg) => h('tr', { 'data-node': hg.labels.node },
    h('td', {}, hg.labels.node), h('td', {}, hg.labels.model), h('td', {}, String(hg.count)),
    h('td', {}, ms(quantile(0.5, hg.buckets))), h('td', {}, ms(quantile(0.99, hg.buckets))))));
  if (!eng.size) engines.append(h('tr', {}, h('td', { colspan: 5, class: 'note' }, 'No engine calls yet.')));
  $('metrics-note').textContent = (previous
    ? `Percentiles since the server started; rates over the last ${seconds.toFixed(0)} s.`
    : 'Percentiles since the server started; rates appear at the next refresh.') + ' The page\'s own routes are left out.';
  previous = { at: now, requests };
}

// refresh reads everything the caller may see.
export async function refresh() {
  const health = await api('/health');
  serverFacts(health);
  nodes(health);
  const allowed = state.authOn === false || state.authorized;
  metrics(allowed ? await api('/metrics') : null);
  renderCalibration($('calibration'), allowed ? await api('/v1/calibration') : null);
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

