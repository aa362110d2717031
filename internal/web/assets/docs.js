// A readable reference of /openapi.json: each operation with its request
// and responses, and each schema as a tree of its properties.
import { h } from './dom.js';

let doc;

function resolve(s) {
  while (s && s.$ref) s = s.$ref.split('/').slice(1).reduce((o, k) => o?.[k], doc);
  return s || {};
}

function typeOf(s) {
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((e) => JSON.stringify(e)).join(' | ');
  const t = s.type ?? s.types;
  if (Array.isArray(t)) return t.map((x) => typeOf({ ...s, type: x })).join(' | ');
  if (t === 'array') return `array of ${typeOf(resolve(s.items))}`;
  if (t) return t;
  if (s.oneOf) return 'one of';
  if (s.anyOf) return s.anyOf.map((o) => typeOf(resolve(o))).join(' | ');
  return 'any';
}

function limits(s) {
  const out = [];
  for (const [k, label] of [['minimum', '≥'], ['maximum', '≤'], ['exclusiveMinimum', '>'], ['exclusiveMaximum', '<'], ['minLength', 'length ≥'], ['maxLength', 'length ≤'],
    ['minItems', 'items ≥'], ['maxItems', 'items ≤'], ['minProperties', 'keys ≥'], ['maxProperties', 'keys ≤']]) {
    if (s[k] !== undefined) out.push(`${label} ${s[k]}`);
  }
  if (s.uniqueItems) out.push('unique');
  if (s.pattern) out.push(`matching ${s.pattern}`);
  return out.join(', ');
}

// tree renders a schema's properties, one level per indent, to depth 5.
function tree(schema, depth = 0) {
  const s = resolve(schema);
  const box = h('div', { class: 'schema' });
  if (depth > 5) return box;
  const required = new Set(s.required || []);
  for (const [name, p0] of Object.entries(s.properties || {})) {
    const p = resolve(p0);
    box.append(h('div', { class: 'prop' }, h('span', { class: 'name' }, name), ' ', h('span', { class: 'type' }, typeOf(p)),
      required.has(name) ? h('span', { class: 'req' }, ' required') : null, limits(p) ? ` (${limits(p)})` : '',
      p.description ? h('span', { class: 'desc' }, ' — ', p.description) : null, child(p, depth)));
  }
  if (!s.properties) {
    const c = child(s, depth);
    if (c) box.append(c);
  }
  return box;
}

function child(p, depth) {
  // anyOf's alternatives are listed when one has a shape of its own;
  // plain types (string | boolean) are said by typeOf alone.
  const alts = p.oneOf ?? (p.anyOf?.some((o) => resolve(o).properties || resolve(o).items) ? p.anyOf : null);
  if (alts) return h('div', { class: 'prop' }, alts.map((o, i) => h('div', {}, h('span', { class: 'desc' }, `option ${i + 1}: ${resolve(o).description || typeOf(resolve(o))}`), tree(o, depth + 1))));
  if (p.properties) return tree(p, depth + 1);
  if ([].concat(p.type).includes('array') && p.items) {
    const i = resolve(p.items);
    if (i.properties || i.oneOf || i.anyOf) return tree(i, depth + 1);
  }
  if (p.additionalProperties && typeof p.additionalProperties === 'object') {
    const a = resolve(p.additionalProperties);
    return h('div', { class: 'prop' }, h('span', { class: 'name' }, '<key>'), ' ', h('span', { class: 'type' }, typeOf(a)), child(a, depth + 1) || '');
  }
  return null;
}

// param is one parameter (its name, where it goes, and its schema) or one
// response header (a header: its name is the key it is listed under).
function param(p0, header) {
  const p = resolve(p0), s = resolve(p.schema);
  return h('div', { class: header ? 'prop header' : 'prop param', 'data-name': header ?? p.name, 'data-in': header ? null : p.in },
    h('span', { class: 'name' }, header ?? p.name), ' ', h('span', { class: 'type' }, `${header ? 'header' : p.in} ${typeOf(s)}`),
    p.required ? h('span', { class: 'req' }, ' required') : null, limits(s) ? ` (${limits(s)})` : '',
    p.description ? h('span', { class: 'desc' }, ' — ', p.description) : null);
}

function body(content) {
  return Object.entries(content || {}).map(([type, m]) => h('div', {}, h('span', { class: 'note' }, type), m.schema ? tree(m.schema) : null));
}

function operation(path, method, op) {
  const open = (op.security || doc.security || []).some((s) => Object.keys(s).length === 0);
  const el = h('section', { class: 'doc-op', id: op.operationId },
    h('h2', {}, h('span', { class: `method ${method}` }, method.toUpperCase()), path, open && (op.security || doc.security).length === 1 ? h('small', {}, 'no key needed') : h('small', {}, 'a key when auth is on')),
    h('p', {}, op.summary), op.description ? h('p', { class: 'note' }, op.description) : null);
  if (op.parameters?.length) el.append(h('h3', {}, 'Parameters'), h('div', { class: 'schema' }, op.parameters.map((p) => param(p))));
  if (op.requestBody) el.append(h('h3', {}, 'Request body'), ...body(op.requestBody.content));
  el.append(h('h3', {}, 'Responses'));
  for (const [code, r] of Object.entries(op.responses || {})) {
    el.append(h('details', { open: code === '200' ? true : null }, h('summary', {}, h('b', {}, code), ' ', r.description),
      r.headers ? h('div', { class: 'schema' }, Object.entries(r.headers).map(([name, hd]) => param(hd, name))) : null, ...body(r.content)));
  }
  return el;
}

async function main() {
  const main = document.getElementById('doc');
  const resp = await fetch('/openapi.json', { cache: 'no-store' });
  doc = await resp.json();
  main.replaceChildren(h('h2', {}, `${doc.info.title} ${doc.info.version}`, h('small', {}, `OpenAPI ${doc.openapi}`)), h('p', {}, doc.info.description));
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) main.append(operation(path, method, op));
  }
  document.body.dataset.ready = 'true';
}

main();
