// The page's entry: the key, the tabs, and the calls every tab makes. The
// page only calls this server's API, with the key its user typed, kept in
// this tab's sessionStorage and nowhere else.
import * as playground from './playground.js';
import * as dashboard from './dashboard.js';

const KEY = 'system1.key';

export function key() { return sessionStorage.getItem(KEY) || ''; }

// state is what the page knows of the server: whether it needs a key and
// whether the one held was accepted.
export const state = { authOn: null, authorized: false };

// api calls the server with the key, if any, and the headers given; a
// request that never left (the server down) is status 0.
export async function api(path, { method = 'GET', body, headers: extra = {} } = {}) {
  const headers = { ...extra };
  if (key()) headers.Authorization = `Bearer ${key()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const start = performance.now();
  let resp;
  try { resp = await fetch(path, { method, headers, body, cache: 'no-store', credentials: 'omit' }); } catch (e) {
    return { status: 0, ok: false, text: `no reply: ${e.message}`, json: null, headers: new Headers() };
  }
  const text = await resp.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: text says what it was */ }
  if (resp.status === 401) unauthorized();
  return { status: resp.status, ok: resp.ok, text, json, ms: performance.now() - start, headers: resp.headers };
}

function unauthorized() {
  state.authOn = true;
  if (state.authorized || key()) {
    sessionStorage.removeItem(KEY);
    document.getElementById('key-error').textContent = 'The server refused that key.';
  }
  state.authorized = false;
  showAuth();
}

function showAuth() {
  const locked = state.authOn && !state.authorized;
  document.getElementById('key-form').hidden = !locked;
  document.getElementById('forget').hidden = !key();
  document.querySelectorAll('.locked').forEach((el) => { el.hidden = !locked; });
  document.querySelectorAll('.unlocked').forEach((el) => { el.hidden = locked; });
  document.getElementById('auth-state').textContent = state.authOn === null ? '' :
    !state.authOn ? 'auth off' : state.authorized ? 'key accepted' : 'no key';
  document.body.dataset.auth = locked ? 'locked' : 'open';
}

// start asks the model list, which needs a key when auth is on: a 401
// says so whatever form /health answers in.
async function start() {
  const health = await api('/health');
  if (typeof health.json?.auth === 'boolean') state.authOn = health.json.auth;
  const models = await api('/v1/models');
  if (models.status !== 401) {
    if (state.authOn === null) state.authOn = Boolean(key());
    state.authorized = models.ok;
  }
  showAuth();
  playground.models(models);
  await dashboard.refresh();
}

function tab() {
  const name = location.hash === '#dashboard' ? 'dashboard' : 'playground';
  for (const el of document.querySelectorAll('.panel')) el.hidden = el.id !== name;
  for (const a of document.querySelectorAll('nav a[data-tab]')) a.classList.toggle('active', a.dataset.tab === name);
  dashboard.visible(name === 'dashboard');
}

document.getElementById('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = document.getElementById('key-input');
  const k = input.value.trim();
  input.value = '';
  if (!k) return;
  sessionStorage.setItem(KEY, k);
  document.getElementById('key-error').textContent = '';
  state.authOn = true;
  start();
});
document.getElementById('forget').addEventListener('click', () => {
  sessionStorage.removeItem(KEY);
  state.authorized = false;
  location.reload();
});
window.addEventListener('hashchange', tab);
playground.init();
dashboard.init();
tab();
start();
