// Two tables of what changes in the answers before any outcome says so
// (docs/shadow.md): drift, the calibration report's drift entry (GET
// /v1/calibration), and the shadow rollouts' comparison (GET /v1/shadow).
// Each reply's shape is read in one place, readDrift and readShadow.
import { h, num } from './dom.js';

// readDrift returns the drift entries of a calibration report's body, or
// null when the body has none.
export function readDrift(body) {
  if (!body || !Array.isArray(body.drift)) return null;
  return body.drift.map((d) => ({
    model: String(d.model ?? ''), signature: String(d.signature ?? ''), kind: String(d.kind ?? ''),
    reference: d.reference, current: d.current, psi: d.psi,
    confidencePSI: d.confidence_psi, labelPSI: d.label_psi,
    meanConfidence: Array.isArray(d.mean_confidence) ? d.mean_confidence : [],
    noise: Array.isArray(d.noise) ? d.noise : [],
    threshold: d.threshold, alarm: d.alarm === true, reason: String(d.reason ?? ''),
  }));
}

// readShadow returns the signatures of a GET /v1/shadow body, or null
// when the body is not a report.
export function readShadow(body) {
  if (!body || !Array.isArray(body.signatures)) return null;
  return body.signatures.map((s) => ({
    model: String(s.model ?? ''), candidate: String(s.candidate ?? ''), signature: String(s.signature ?? ''), kind: String(s.kind ?? ''),
    n: s.n, agreement: s.agreement, meanAbsChange: s.mean_abs_change, confidenceShift: s.confidence_shift,
    labelled: s.labelled, nllDiff: s.nll_diff, nllDiffSE: s.nll_diff_se, accuracyDiff: s.accuracy_diff, accuracyDiffSE: s.accuracy_diff_se,
    recommendation: String(s.recommendation ?? ''), evidence: String(s.evidence ?? ''),
  }));
}

// unavailable says why a report is not shown: no key, or the reply.
function unavailable(r, route) {
  if (!r) return 'it needs a key';
  if (r.status !== 200) return `${route} answered ${r.status}${r.json?.detail?.message ? `: ${r.json.detail.message}` : ''}`;
  return 'the reply is not a report';
}

const cell = (col, text, attrs = {}) => h('td', { 'data-col': col, ...attrs }, text);

// pm is a difference with its standard error.
const pm = (x, se) => `${num(x)} ± ${num(se)}`;

// renderDrift fills the drift table from a GET /v1/calibration reply.
export function renderDrift(table, note, r) {
  const list = r && r.status === 200 ? readDrift(r.json) : null;
  const body = table.tBodies[0];
  if (!list) {
    body.replaceChildren();
    note.textContent = `No drift report is available (${unavailable(r, 'GET /v1/calibration')}).`;
    return;
  }
  note.textContent = list.length ? '' : 'No answers in the drift windows yet.';
  body.replaceChildren(...list.map((d) => h('tr', { 'data-model': d.model, 'data-signature': d.signature, class: d.alarm ? 'changed' : null },
    cell('model', d.model), cell('signature', d.signature), cell('reference', String(d.reference ?? '—')), cell('current', String(d.current ?? '—')),
    cell('confidence_psi', num(d.confidencePSI)), cell('label_psi', num(d.labelPSI)),
    cell('noise', `${num(d.noise[0])} / ${num(d.noise[1])}`),
    cell('mean_confidence', `${num(d.meanConfidence[0])} → ${num(d.meanConfidence[1])}`),
    cell('alarm', d.alarm ? 'alarm' : 'no', { class: d.alarm ? 'down' : 'ok', title: d.reason || null }),
    cell('reason', d.reason))));
}

// renderShadow fills the shadow table from a GET /v1/shadow reply.
export function renderShadow(table, note, r) {
  const list = r && r.status === 200 ? readShadow(r.json) : null;
  const body = table.tBodies[0];
  if (!list) {
    body.replaceChildren();
    note.textContent = `No shadow report is available (${unavailable(r, 'GET /v1/shadow')}).`;
    return;
  }
  note.textContent = list.length ? '' : 'No shadow answers in the window: no shadow rollout is configured, or none has been asked yet.';
  body.replaceChildren(...list.map((s) => h('tr', { 'data-model': s.model, 'data-candidate': s.candidate, 'data-signature': s.signature },
    cell('model', s.model), cell('candidate', s.candidate), cell('signature', s.signature), cell('n', String(s.n ?? '—')),
    cell('agreement', num(s.agreement)), cell('mean_abs_change', num(s.meanAbsChange)), cell('confidence_shift', num(s.confidenceShift)),
    cell('labelled', String(s.labelled ?? '—')),
    cell('nll_diff', s.labelled ? pm(s.nllDiff, s.nllDiffSE) : '—'), cell('accuracy_diff', s.labelled ? pm(s.accuracyDiff, s.accuracyDiffSE) : '—'),
    cell('recommendation', s.recommendation, { title: s.evidence || null }), cell('evidence', s.evidence))));
}
