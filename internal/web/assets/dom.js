// Small DOM helpers shared by the page's modules. Everything from the
// server is written as text, never as HTML.

// h makes an element: h('td', {class: 'x'}, 'text', child, ...).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// svg makes an SVG element with attributes.
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : String(c));
  return el;
}

// num prints a number as the API gave it, shortened to four significant
// digits: a whole number as it is, and a small one kept (a label-mass
// gate of 0.000665 is 0.000665, not 0.0007).
export function num(x) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '—';
  return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(4)));
}

// bar is one option's probability: a label, a filled track and the value.
export function bar(label, p, chosen, key = label) {
  const fill = h('span', { class: 'fill' });
  fill.style.width = `${Math.max(0, Math.min(1, p)) * 100}%`; // CSSOM, allowed by the policy
  return h('div', { class: chosen ? 'bar chosen' : 'bar', 'data-option': key, 'data-p': p },
    h('span', { class: 'label', title: label }, label), h('span', { class: 'track' }, fill), h('span', { class: 'value' }, num(p)));
}

// facts fills a <dl> from [term, value] pairs.
export function facts(dl, pairs) {
  dl.replaceChildren(...pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k }, v)]));
}

// shellQuote quotes a string for a POSIX shell.
export function shellQuote(s) {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

// curl is the same request as a command, with the key left as a variable
// so that it is never shown on screen, and any other headers given.
export function curl(method, path, body, withKey, headers = {}) {
  const parts = [`curl -s -X ${method} ${shellQuote(location.origin + path)}`];
  if (withKey) parts.push(`-H "Authorization: Bearer $SYSTEM1_KEY"`);
  for (const [k, v] of Object.entries(headers)) parts.push(`-H ${shellQuote(`${k}: ${v}`)}`);
  if (body !== undefined) parts.push(`-H 'Content-Type: application/json'`, `-d ${shellQuote(body)}`);
  return parts.join(' \\\n  ');
}

// pretty indents JSON text for reading, keeping it as sent when it is not JSON.
export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}
