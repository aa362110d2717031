// Spend per key this UTC month, from GET /v1/usage?group_by=key: what
// each key's answers cost (what its budget counts), its decisions and
// tokens. The shape is read in one place, readUsage.
import { h } from './dom.js';

// monthStart is the first day of the UTC month holding now, as the
// query's since takes it.
export function monthStart(now = new Date()) {
  return `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-01`;
}

// usagePath is the route the dashboard asks.
export const usagePath = () => `/v1/usage?group_by=key&since=${monthStart()}`;

// readUsage returns the groups of a GET /v1/usage body, or null when the
// body is not a report.
export function readUsage(body) {
  if (!body || !Array.isArray(body.groups)) return null;
  return body.groups.map((g) => ({
    key: String(g.key ?? ''), usd: String(g.usd ?? ''), decisions: g.decisions, unpriced: g.unpriced,
    input: g.input_tokens, output: g.output_tokens,
  }));
}

const cell = (col, text) => h('td', { 'data-col': col }, text);

// renderUsage fills the spend table from a GET /v1/usage reply: usd as
// the API writes it, an exact decimal.
export function renderUsage(table, note, r) {
  const list = r && r.status === 200 ? readUsage(r.json) : null;
  const body = table.tBodies[0];
  if (!list) {
    body.replaceChildren();
    const why = !r ? 'it needs a key' : r.status !== 200 ? `GET /v1/usage answered ${r.status}` : 'the reply is not a report';
    note.textContent = `No usage is available (${why}).`;
    return;
  }
  note.textContent = list.length ? '' : 'No answers this month yet.';
  body.replaceChildren(...list.map((g) => h('tr', { 'data-key': g.key },
    cell('key', g.key || '(no key)'), cell('usd', `$${g.usd}`), cell('decisions', String(g.decisions ?? '—')),
    cell('input_tokens', String(g.input ?? '—')), cell('output_tokens', String(g.output ?? '—')),
    cell('unpriced', String(g.unpriced ?? '—')))));
}
