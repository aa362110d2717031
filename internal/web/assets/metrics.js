// Reads the Prometheus text format that GET /metrics serves, and turns its
// histograms into percentiles the way Prometheus' histogram_quantile does:
// linear interpolation inside the bucket that holds the rank.

function value(s) {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return Number(s);
}

// parse returns every sample: {name, labels, value}.
export function parse(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    out.push({ name: m[1], labels, value: value(m[3]) });
  }
  return out;
}

// key names a series by its labels, le left out.
function key(labels, by) { return JSON.stringify(by.map((l) => labels[l] ?? '')); }

// histograms groups a histogram's buckets by the labels named in by:
// a Map from the key to {labels, buckets: [{le, count}] ascending, count, sum}.
export function histograms(samples, name, by) {
  const out = new Map();
  const get = (labels) => {
    const k = key(labels, by);
    if (!out.has(k)) out.set(k, { labels: Object.fromEntries(by.map((l) => [l, labels[l] ?? ''])), buckets: [], count: 0, sum: 0 });
    return out.get(k);
  };
  for (const s of samples) {
    if (s.name === `${name}_bucket`) get(s.labels).buckets.push({ le: value(s.labels.le), count: s.value });
    else if (s.name === `${name}_count`) get(s.labels).count = s.value;
    else if (s.name === `${name}_sum`) get(s.labels).sum = s.value;
  }
  for (const h of out.values()) h.buckets.sort((a, b) => a.le - b.le);
  return out;
}

// quantile is the q-quantile (0..1) of cumulative buckets, NaN when empty.
export function quantile(q, buckets) {
  if (!buckets.length) return NaN;
  const total = buckets[buckets.length - 1].count;
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let i = buckets.findIndex((b) => b.count >= rank);
  if (i < 0) i = buckets.length - 1;
  if (buckets[i].le === Infinity) return i > 0 ? buckets[i - 1].le : NaN;
  const lower = i === 0 ? 0 : buckets[i - 1].le;
  const below = i === 0 ? 0 : buckets[i - 1].count;
  const inBucket = buckets[i].count - below;
  if (inBucket <= 0) return buckets[i].le;
  return lower + (buckets[i].le - lower) * ((rank - below) / inBucket);
}

// sum adds a counter's samples by the labels named in by.
export function sum(samples, name, by) {
  const out = new Map();
  for (const s of samples) {
    if (s.name !== name) continue;
    const k = key(s.labels, by);
    out.set(k, (out.get(k) || 0) + s.value);
  }
  return out;
}

export { key as seriesKey };
