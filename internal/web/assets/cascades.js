// The cascades table (docs/cascades.md): the calibration report's
// cascades entry (GET /v1/calibration), a row per stage, the cascade's
// own cells spanning its rows; costs as the exact decimals the API
// writes, a dash when unknown.
import { h, num } from './dom.js';

const cell = (col, text, attrs = {}) => h('td', { 'data-col': col, ...attrs }, text);
const usd = (s) => (typeof s === 'string' ? `$${s}` : '—');

export function renderCascades(table, note, r) {
  const ok = r && r.status === 200;
  // A report without cascades is a server with none configured.
  const list = ok && Array.isArray(r.json?.cascades) ? r.json.cascades : [];
  note.textContent = !ok ? `No cascade report is available (${r ? `GET /v1/calibration answered ${r.status}` : 'it needs a key'}).`
    : list.length ? '' : 'No cascade is configured.';
  table.tBodies[0].replaceChildren(...list.flatMap((c) => (c.stages ?? []).map((s, i, all) => {
    const span = { rowspan: all.length };
    const own = i ? [] : [cell('cascade', c.model, span), cell('target', num(c.target_error), span)];
    const tail = i ? [] : [cell('certified', c.certified ? 'yes' : 'no', { ...span, class: c.certified ? 'ok' : 'down' }),
      cell('cost_per_1000', usd(c.cost_per_1000), span), cell('last_stage_cost_per_1000', usd(c.last_stage_cost_per_1000), span)];
    return h('tr', { 'data-model': c.model, 'data-stage': s.stage }, ...own, cell('stage', s.stage),
      cell('asked', String(s.asked ?? '—')), cell('answered', String(s.answered ?? '—')), cell('share', num(s.share)),
      cell('error', num(s.error)), cell('upper_bound', num(s.upper_bound)), ...tail);
  })));
}
