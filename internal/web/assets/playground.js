// The playground: a state, typed questions and a model, sent to POST
// /v1/systemone or, on its second tab, as the same request on OpenAI's
// Decisions wire to POST /v1/decisions; and one decision sent to POST
// /v1/decide. Each answer is drawn from the reply as the API gave it.
import { api, state } from './app.js';
import { h, bar, num, curl, pretty, facts } from './dom.js';

const $ = (id) => document.getElementById(id);

// The first questions shown, with the state in index.html: the README's
// request (TestBrowserPresetIsTheReadmeRequest holds them equal).
const examples = [
  { kind: 'choice', id: 'department', instructions: 'Which team should handle this ticket?',
    criteria: 'billing: payments, refunds, invoices\ntechnical: bugs and outages\nsales: new plans' },
  { kind: 'noul', id: 'urgent', instructions: 'Does this need action today?', criteria: '' },
  { kind: 'score', id: 'frustration', instructions: '', criteria: 'calm\nannoyed\nangry' },
];

const hints = {
  choice: 'one option per line: name, or name: what it means',
  score: 'one level per line, lowest first',
};

function addQuestion({ kind, id = '', instructions = '', criteria = '' }) {
  const n = document.querySelectorAll('.question').length + 1;
  const card = h('div', { class: 'question', 'data-kind': kind },
    h('div', { class: 'row' },
      h('span', { class: `kind ${kind}`, 'data-kind': kind }, wireKind(kind)),
      h('input', { class: 'qid', value: id || `q${n}`, 'aria-label': 'question id', spellcheck: 'false' }),
      h('span', { class: 'grow' }),
      h('button', { type: 'button', class: 'remove', title: 'remove' }, 'remove')),
    h('textarea', { class: 'instructions', rows: 1, placeholder: 'instructions (optional)' }),
    kind === 'noul' ? null : h('textarea', { class: 'criteria', rows: 3, placeholder: hints[kind], spellcheck: 'false' }));
  card.querySelector('.instructions').value = instructions;
  if (kind !== 'noul') card.querySelector('.criteria').value = criteria;
  card.querySelector('.remove').addEventListener('click', () => card.remove());
  $('questions').append(card);
}

// object writes pairs as a JSON object in their order (a JS object would
// put integer-like keys first).
function object(pairs) {
  return `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
}

function lines(text) { return text.split('\n').map((l) => l.trim()).filter(Boolean); }

// wire is the tab the editor's request goes out on: systemone or
// decisions.
let wire = 'systemone';
const routes = { systemone: '/v1/systemone', decisions: '/v1/decisions' };
// The Decisions wire's word for a question kind.
const decisionsType = { noul: 'predicate', choice: 'choice', score: 'score' };

// wireKind is a kind as the current wire names it: the editor says
// predicate on the Decisions tab, where the request does.
function wireKind(kind) { return wire === 'decisions' ? decisionsType[kind] : kind; }

// request reads the editor: the body as the current wire sends it, and
// each question's option keys in order, to draw the bars in the order the
// model saw them. On the Decisions wire a JSON state is one user message's
// input_json part (text otherwise), a question's id is its name, a
// choice's criteria are its choices and a score's levels are labelled by
// their text, as the same request on either wire reads the same.
function request() {
  const raw = $('state').value;
  let stateJSON = JSON.stringify(raw);
  let input = stateJSON;
  if (document.querySelector('input[name=state-kind]:checked').value === 'json') {
    let parsed;
    try { parsed = JSON.parse(raw); } catch (e) { throw new Error(`state is not JSON: ${e.message}`); }
    stateJSON = JSON.stringify(parsed);
    const objects = typeof parsed === 'object' && parsed !== null && (!Array.isArray(parsed) || parsed.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x)));
    input = objects ? JSON.stringify([{ role: 'user', content: [{ type: 'input_json', data: parsed }] }]) : JSON.stringify(stateJSON);
  }
  const questions = [];
  const list = [];
  const order = {};
  for (const card of document.querySelectorAll('.question')) {
    const kind = card.dataset.kind;
    const id = card.querySelector('.qid').value.trim();
    const q = [['type', JSON.stringify(kind)]];
    const d = [['type', JSON.stringify(decisionsType[kind])], ['name', JSON.stringify(id)]];
    const instr = card.querySelector('.instructions').value.trim();
    if (instr) {
      q.push(['instructions', JSON.stringify(instr)]);
      d.push(['instructions', JSON.stringify(instr)]);
    }
    if (kind === 'choice') {
      const pairs = lines(card.querySelector('.criteria').value).map((l) => {
        const i = l.indexOf(':');
        return i < 0 ? [l, null] : [l.slice(0, i).trim(), l.slice(i + 1).trim()];
      });
      q.push(['criteria', object(pairs.map(([k, v]) => [k, JSON.stringify(v)]))]);
      d.push(['choices', JSON.stringify(pairs.map(([k, v]) => (v === null ? { value: k } : { value: k, description: v })))]);
      order[id] = pairs.map(([k]) => k);
    } else if (kind === 'score') {
      const levels = lines(card.querySelector('.criteria').value);
      q.push(['criteria', JSON.stringify(levels)]);
      d.push(['levels', JSON.stringify(levels.map((l) => ({ label: l })))]);
      order[id] = levels.map((_, i) => String(i));
    } else {
      order[id] = [];
    }
    questions.push([id, object(q)]);
    list.push(object(d));
  }
  const model = JSON.stringify($('model').value);
  const body = wire === 'decisions'
    ? object([['model', model], ['input', input], ['questions', `[${list.join(',')}]`]])
    : object([['model', model], ['state', stateJSON], ['questions', object(questions)]]);
  const headers = {};
  const mass = $('min-mass').value.trim();
  if (mass) headers['X-System1-Min-Label-Mass'] = mass;
  return { body, order, headers };
}

// fromDecisions reads a Decisions reply's answers, in question order, as
// the cards draw them: [id, answer, the wire's type], a predicate as a
// noul, values and levels keyed by their text and index, a score's labels
// as its legend.
function fromDecisions(answers) {
  return answers.map((a, i) => {
    const id = a.name ?? `questions[${i}]`;
    const probs = (a.probabilities || []).map((p) => [String(p.value), p.probability]);
    switch (a.type) {
      case 'predicate': return [id, { type: 'noul', noul: a.probability }, a.type];
      case 'choice': return [id, { type: 'choice', choice: String(a.choice), confidence: a.confidence, probabilities: Object.fromEntries(probs) }, a.type];
      case 'score': return [id, { type: 'score', score: a.score, confidence: a.confidence, probabilities: Object.fromEntries(probs),
        legend: Object.fromEntries(a.probabilities.map((p) => [String(p.value), p.label])) }, a.type];
      default: return [id, { type: a.type }, a.type];
    }
  });
}

// unescapeHeader undoes a header's escapes (\xHH, \\): UTF-8 text.
const unescapeHeader = (s) => new TextDecoder().decode(Uint8Array.from(
  s.replace(/\\(?:x([0-9a-f]{2})|\\)/g, (_, hex) => String.fromCharCode(hex ? parseInt(hex, 16) : 92)), (c) => c.charCodeAt(0)));

// refusalCard is a question system1 would not stand behind, with why
// (X-System1-Refused) where the reply says it.
function refusalCard(id, why) {
  return h('div', { class: 'answer', 'data-question': id, 'data-type': 'refusal' },
    h('h3', {}, h('span', { class: 'kind refusal' }, 'refusal'), id),
    h('p', { class: 'note', 'data-field': 'why' }, why || 'refused'));
}

function chooseWire(name) {
  wire = name;
  for (const b of document.querySelectorAll('[data-wire]')) {
    b.classList.toggle('active', b.dataset.wire === name);
    b.setAttribute('aria-selected', String(b.dataset.wire === name));
  }
  $('route').textContent = `POST ${routes[name]}`;
  for (const k of document.querySelectorAll('#questions .kind[data-kind]')) k.textContent = wireKind(k.dataset.kind);
  for (const b of document.querySelectorAll('[data-add]')) b.textContent = `+ ${wireKind(b.dataset.add)}`;
}

function answerCard(id, a, order, label = a.type) {
  const card = h('div', { class: 'answer', 'data-question': id, 'data-type': a.type },
    h('h3', {}, h('span', { class: `kind ${label}` }, label), id));
  if (a.type === 'noul') {
    card.append(h('div', { class: 'headline' }, 'P(true) ', h('b', { 'data-field': 'noul' }, num(a.noul))),
      bar('true', a.noul, a.noul >= 0.5), bar('false', Number((1 - a.noul).toPrecision(12)), a.noul < 0.5));
    return card;
  }
  const probs = a.probabilities || {};
  const keys = (order || []).filter((k) => k in probs);
  for (const k of Object.keys(probs)) if (!keys.includes(k)) keys.push(k);
  if (a.type === 'choice') {
    card.append(h('div', { class: 'headline' }, h('b', { 'data-field': 'choice' }, a.choice),
      ' · confidence ', h('b', { 'data-field': 'confidence' }, num(a.confidence))));
    for (const k of keys) card.append(bar(k, probs[k], k === a.choice));
  } else {
    const top = keys.length - 1;
    // The marked level is the most likely one (the first on a tie), not
    // the one nearest the expected score: a score of 0.83 over 0.5, 0.17
    // and 0.33 is most likely level 0, not level 1.
    const likeliest = keys.reduce((best, k) => (probs[k] > probs[best] ? k : best), keys[0]);
    card.append(h('div', { class: 'headline' }, 'score ', h('b', { 'data-field': 'score' }, num(a.score)),
      ` on 0–${top} · confidence `, h('b', { 'data-field': 'confidence' }, num(a.confidence))));
    for (const k of keys) {
      const legend = a.legend?.[k];
      const label = `${k}: ${typeof legend === 'string' ? legend : JSON.stringify(legend)}`;
      card.append(bar(label, probs[k], k === likeliest, k));
    }
  }
  return card;
}

async function send() {
  let req;
  try { req = request(); } catch (e) { $('send-status').textContent = e.message; return; }
  $('send').disabled = true;
  $('send-status').textContent = 'asking…';
  const route = routes[wire];
  const r = await api(route, { method: 'POST', body: req.body, headers: req.headers });
  $('send').disabled = false;
  $('answers').replaceChildren();
  $('reply').hidden = false;
  $('raw').textContent = pretty(r.text);
  $('curl').textContent = curl('POST', route, req.body, state.authOn, req.headers);
  if (!r.ok || !r.json?.answers) {
    $('send-status').textContent = '';
    $('answers').append(h('p', { class: 'error', id: 'send-error' }, `${r.status}: ${errorText(r)}`));
    return;
  }
  const j = r.json;
  $('send-status').textContent = '';
  const grid = h('div', { class: 'answers' });
  const meta = h('dl', { class: 'facts', id: 'answer-meta' });
  if (wire === 'decisions') {
    // X-System1-Refused: "id: why; id: why".
    const why = Object.fromEntries((r.headers.get('x-system1-refused') || '').split('; ')
      .map((w) => [unescapeHeader(w.slice(0, w.indexOf(': '))), unescapeHeader(w.slice(w.indexOf(': ') + 2))]));
    for (const [id, a, type] of fromDecisions(j.answers)) {
      grid.append(a.type === 'refusal' ? refusalCard(id, why[id]) : answerCard(id, a, req.order[id], type));
    }
    facts(meta, [
      ['model', j.model],
      ['round trip ms', Math.round(r.ms)],
      ['input_tokens', String(j.usage.input_tokens)],
      ['output_tokens', String(j.usage.output_tokens)],
      ['total_tokens', String(j.usage.total_tokens)],
      ['request id', r.headers.get('x-request-id') || ''],
    ]);
  } else {
    for (const [id, a] of Object.entries(j.answers)) grid.append(answerCard(id, a, req.order[id]));
    facts(meta, [
      ['model', j.model],
      ['latency_ms', String(j.latency_ms)],
      ['round trip ms', Math.round(r.ms)],
      ['input_tokens', String(j.usage.input_tokens)],
      ['output_tokens', String(j.usage.output_tokens) + (j.usage.estimated ? ' (estimated)' : '')],
      ['request id', r.headers.get('x-typesafe-request-id') || ''],
    ]);
  }
  $('answers').append(grid, meta);
}

// errorText is an error reply's message in either shape system1 writes.
function errorText(r) {
  const j = r.json;
  if (!j) return r.text || 'no reply';
  if (Array.isArray(j.detail)) return j.detail.map((d) => `${(d.loc || []).join('.')}: ${d.msg}`).join('\n');
  return j.error?.message || j.detail?.message || j.detail || j.rationale || r.text;
}

function decideBody() {
  const pairs = [['question', JSON.stringify($('d-question').value.trim())]];
  const options = lines($('d-options').value);
  if (options.length) pairs.push(['options', JSON.stringify(options)]);
  const ctx = $('d-context').value.trim();
  if (ctx) {
    try { pairs.push(['context', JSON.stringify(JSON.parse(ctx))]); } catch (e) { throw new Error(`context is not JSON: ${e.message}`); }
  }
  const min = $('d-min').value.trim();
  if (min) pairs.push(['min_confidence', String(Number(min))]);
  return object(pairs);
}

async function decide() {
  let body;
  try { body = decideBody(); } catch (e) { $('d-status').textContent = e.message; return; }
  $('d-send').disabled = true;
  $('d-status').textContent = 'asking…';
  const r = await api('/v1/decide', { method: 'POST', body });
  $('d-send').disabled = false;
  $('d-status').textContent = '';
  $('d-reply').hidden = false;
  $('d-raw').textContent = pretty(r.text);
  $('d-curl').textContent = curl('POST', '/v1/decide', body, state.authOn);
  const out = $('decision');
  out.replaceChildren();
  const j = r.json;
  if (!j || !j.status) {
    out.append(h('p', { class: 'error', id: 'd-error' }, r.status === 404 ? 'POST /v1/decide is not served here (no gateway configured).' : `${r.status}: ${errorText(r)}`));
    return;
  }
  const card = h('div', { class: 'answer', id: 'decide-answer', 'data-status': j.status },
    h('h3', {}, h('span', { class: `status ${j.status}` }, j.status), j.decision === null ? 'no decision' : h('span', { 'data-field': 'decision' }, j.decision)));
  const dl = h('dl', { class: 'facts' });
  const pairs = [
    ['confidence', num(j.confidence)],
    ['threshold', num(j.threshold)],
    ['calibrated', String(j.calibrated)],
    ['provider', j.provider ?? '—'],
    ['latency_ms', String(j.latency_ms)],
  ];
  if ('grade' in j) pairs.push(['grade', typeof j.grade === 'string' ? j.grade : JSON.stringify(j.grade)]);
  if (j.error) pairs.push(['error', `${j.error.code}: ${j.error.message}`]);
  pairs.push(['rationale', j.rationale]);
  facts(dl, pairs);
  card.append(dl);
  for (const [k, p] of Object.entries(j.probabilities || {})) card.append(bar(k, p, k === j.decision));
  const rows = (j.attempts || []).map((a) => h('tr', {}, h('td', {}, a.provider), h('td', {}, a.outcome), h('td', {}, String(a.latency_ms)), h('td', {}, a.detail)));
  card.append(h('h3', {}, 'attempts'), h('table', { id: 'attempts' },
    h('thead', {}, h('tr', {}, h('th', {}, 'provider'), h('th', {}, 'outcome'), h('th', {}, 'ms'), h('th', {}, 'detail'))), h('tbody', {}, rows)));
  out.append(card);
}

// models fills the picker from GET /v1/models.
export function models(r) {
  const sel = $('model');
  const names = (r.json?.models || []).map((m) => m.name);
  sel.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
  $('send').disabled = !names.length;
  if (r.ok && !names.length) $('send-status').textContent = 'no model is served';
}

async function copy(id, button) {
  const text = $(id).textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    getSelection().selectAllChildren($(id)); // no clipboard here (plain HTTP off localhost): select it instead
    button.textContent = 'Selected';
  }
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

export function init() {
  examples.forEach(addQuestion);
  for (const b of document.querySelectorAll('[data-add]')) b.addEventListener('click', () => addQuestion({ kind: b.dataset.add }));
  for (const b of document.querySelectorAll('[data-copy]')) b.addEventListener('click', () => copy(b.dataset.copy, b));
  for (const b of document.querySelectorAll('[data-wire]')) b.addEventListener('click', () => chooseWire(b.dataset.wire));
  $('send').addEventListener('click', send);
  $('d-send').addEventListener('click', decide);
}
