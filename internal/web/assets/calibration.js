// The calibration report of GET /v1/calibration: per model and kind, how
// often answers at each confidence were right, and the gate suggested for
// a target error. The report's shape is read in one place, readReport,
// so that a change of the endpoint's shape is a change here alone.
import { h, svg, num } from './dom.js';

// readReport checks a reply's body and returns its buckets in the shape
// the drawing below uses, or null when the body is not a report.
export function readReport(body) {
  if (!body || !Array.isArray(body.buckets)) return null;
  return body.buckets.map((b) => ({
    model: String(b.model ?? ''),
    kind: String(b.kind ?? ''),
    fp: b.fingerprint,
    options: b.options ?? b.bucket,
    outcomes: b.outcomes,
    accuracy: b.accuracy,
    accuracyCalibrated: b.accuracy_calibrated,
    mae: b.mae,
    maeCalibrated: b.mae_calibrated,
    method: b.method,
    ece: b.ece,
    eceCalibrated: b.ece_calibrated,
    nll: b.nll,
    nllCalibrated: b.nll_calibrated,
    temperature: b.temperature,
    gate: b.gate ? { threshold: b.gate.threshold, targetError: b.gate.target_error, coverage: b.gate.coverage, wrongAbove: b.gate.wrong_above } : null,
    reliability: (Array.isArray(b.reliability) ? b.reliability : []).map((r) => ({ confidence: r.confidence, accuracy: r.accuracy, count: r.count })),
    sets: (Array.isArray(b.sets) ? b.sets : []).map((c) => ({
      coverage: c.coverage, outcomes: c.outcomes,
      heldOut: c.held_out ? { coverage: c.held_out.coverage, size: c.held_out.mean_size } : null,
      sinceFit: c.since_fit ? { n: c.since_fit.n, coverage: c.since_fit.coverage, size: c.since_fit.mean_size } : null,
    })),
  }));
}

// diagram draws a reliability diagram: accuracy against confidence, one
// dot per bin sized by its count, the diagonal of perfect calibration and
// the gate's threshold.
export function diagram(b) {
  const W = 240, P = 28, S = W - 2 * P;
  const x = (c) => P + c * S, y = (a) => W - P - a * S;
  const g = svg('svg', { class: 'reliability', viewBox: `0 0 ${W} ${W}`, role: 'img', 'aria-label': `reliability of ${b.model} ${b.kind}` });
  g.append(svg('line', { class: 'axis', x1: P, y1: W - P, x2: W - P, y2: W - P }), svg('line', { class: 'axis', x1: P, y1: P, x2: P, y2: W - P }),
    svg('line', { class: 'diag', x1: x(0), y1: y(0), x2: x(1), y2: y(1) }));
  for (const t of [0, 0.5, 1]) {
    g.append(svg('text', { x: x(t), y: W - P + 12, 'text-anchor': 'middle' }, String(t)), svg('text', { x: P - 4, y: y(t) + 3, 'text-anchor': 'end' }, String(t)));
  }
  g.append(svg('text', { x: W / 2, y: W - 2, 'text-anchor': 'middle' }, 'confidence'), svg('text', { x: 8, y: P - 10 }, 'accuracy'));
  if (b.gate && Number.isFinite(b.gate.threshold)) {
    g.append(svg('line', { class: 'gate', x1: x(b.gate.threshold), y1: P, x2: x(b.gate.threshold), y2: W - P }),
      svg('text', { x: x(b.gate.threshold) + 3, y: W - P - 4 }, `gate ${num(b.gate.threshold)}`));
  }
  const most = Math.max(1, ...b.reliability.map((r) => r.count || 0));
  for (const r of b.reliability) {
    if (!Number.isFinite(r.confidence) || !Number.isFinite(r.accuracy)) continue;
    g.append(svg('line', { class: 'gap', x1: x(r.confidence), y1: y(r.confidence), x2: x(r.confidence), y2: y(r.accuracy) }),
      svg('circle', { class: 'pt', cx: x(r.confidence), cy: y(r.accuracy), r: 2 + 5 * Math.sqrt((r.count || 0) / most), 'data-count': r.count }));
  }
  return g;
}

// render fills el from a GET /v1/calibration reply.
export function render(el, r) {
  const buckets = r && r.status === 200 ? readReport(r.json) : null;
  if (!buckets) {
    const why = !r ? 'it needs a key' : r.status === 200 ? 'the reply is not a report' : `GET /v1/calibration answered ${r.status}`;
    el.replaceChildren(h('p', { class: 'note', id: 'no-calibration' }, `No calibration report is available (${why}).`));
    return;
  }
  // What the server's learning loop does and waits for, so that a report
  // with nothing learnt says why.
  const loop = r.json.loop && typeof r.json.loop.status === 'string'
    ? h('p', { class: 'note', id: 'loop' }, `Learning loop: ${r.json.loop.status}.`) : null;
  if (!buckets.length) {
    el.replaceChildren(...(loop ? [loop] : []), h('p', { class: 'note', id: 'no-calibration' }, 'The calibration report has no buckets yet: no outcomes have been recorded.'));
    return;
  }
  el.replaceChildren(...(loop ? [loop] : []), h('div', { class: 'calibration' }, buckets.map((b) => {
    const card = h('div', { class: 'answer', 'data-model': b.model, 'data-kind': b.kind },
      h('h3', {}, h('span', { class: `kind ${b.kind}` }, b.kind), b.model, h('small', {}, b.options && `${b.options} options`, b.fp && ` build ${b.fp}`)));
    const dl = h('dl', { class: 'facts' });
    const rows = [
      ['outcomes', String(b.outcomes ?? '—')], ['accuracy', num(b.accuracy)],
    ];
    if (b.accuracyCalibrated !== undefined) rows.push(['accuracy calibrated', num(b.accuracyCalibrated)]);
    if (b.mae !== undefined) rows.push(['MAE', `${num(b.mae)} → ${num(b.maeCalibrated)} calibrated`]);
    rows.push(['ECE', `${num(b.ece)} → ${num(b.eceCalibrated)} calibrated`], ['NLL', `${num(b.nll)} → ${num(b.nllCalibrated)} calibrated`],
      ['temperature', num(b.temperature)]);
    if (b.method) rows.push(['calibrator', String(b.method)]);
    for (const c of b.sets) {
      // A set's coverage on outcomes it was not fitted on: by
      // cross-validation when fitted, and on the outcomes since.
      const held = c.heldOut ? `held out ${num(c.heldOut.coverage)} (size ${num(c.heldOut.size)})` : 'not measured held out';
      const since = c.sinceFit && c.sinceFit.n > 0 ? `; since the fit ${num(c.sinceFit.coverage)} over ${c.sinceFit.n}` : '';
      rows.push([`sets at ${num(c.coverage)}`, `${held}${since}; from ${c.outcomes} outcomes`]);
    }
    if (b.gate && Number.isFinite(b.gate.threshold)) {
      rows.push(['suggested gate', `confidence ≥ ${num(b.gate.threshold)} for error ≤ ${num(b.gate.targetError)}`],
        ['coverage', num(b.gate.coverage)], ['wrong above gate', num(b.gate.wrongAbove)]);
    } else if (b.gate) {
      // The report's threshold is null when no gate holds the error
      // bound: too few outcomes, or too many wrong even at the top.
      rows.push(['suggested gate', `none: no confidence keeps the error ≤ ${num(b.gate.targetError)} with these outcomes (too few, or too many wrong even among the most confident)`]);
    }
    for (const [k, v] of rows) dl.append(h('dt', {}, k), h('dd', { 'data-fact': k }, v));
    card.append(dl, diagram(b));
    return card;
  })));
}
