// A reader of the Prometheus text exposition format (0.0.4), enough for `store top` and the
// operator's status figures: every sample line as name, labels and value; comments and blank
// lines skipped; label values unescaped (\\, \", \n). Hand-written (about 50 lines): the
// project's prom-client only writes the format, and its readers need no more than the samples. Pure.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

/** The samples of a scrape; a line that does not parse is skipped (never fatal for a view). */
export function parsePromText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const s = parseLine(line);
    if (s) out.push(s);
  }
  return out;
}

function parseLine(line: string): Sample | undefined {
  const m = NAME.exec(line);
  if (!m) return undefined;
  const name = m[0];
  let i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    while (line[i] !== '}') {
      if (i >= line.length) return undefined;
      if (line[i] === ',' || line[i] === ' ') {
        i++;
        continue;
      }
      const eq = line.indexOf('=', i);
      if (eq < 0 || line[eq + 1] !== '"') return undefined;
      const key = line.slice(i, eq).trim();
      let j = eq + 2;
      let value = '';
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && j + 1 < line.length) {
          j++;
          value += line[j] === 'n' ? '\n' : line[j];
        } else value += line[j];
      }
      if (j >= line.length) return undefined;
      labels[key] = value;
      i = j + 1;
    }
    i++;
  }
  const fields = line.slice(i).trim().split(/\s+/);
  const value = parseValue(fields[0] ?? '');
  return value === undefined ? undefined : { name, labels, value };
}

function parseValue(text: string): number | undefined {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const v = Number(text);
  return text === '' || Number.isNaN(v) ? undefined : v;
}

/** The sum of the samples named `name` whose labels include `match`. */
export function total(samples: readonly Sample[], name: string, match: Record<string, string | readonly string[]> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    let ok = true;
    for (const [k, want] of Object.entries(match)) {
      const have = s.labels[k];
      if (typeof want === 'string' ? have !== want : !want.includes(have ?? '')) {
        ok = false;
        break;
      }
    }
    if (ok) sum += s.value;
  }
  return sum;
}

/** Whether any sample is named `name`. */
export function has(samples: readonly Sample[], name: string): boolean {
  return samples.some((s) => s.name === name);
}
