// The JSONPath subset that CRD additionalPrinterColumns use: `.a.b`, `.a[0]`, `.a[*].b` and
// filters `.conditions[?(@.type=="Ready")].status`. Returns every match, in document order.

import { isPlainObject } from './json-patch.js';

type Step = { field: string } | { index: number } | { all: true } | { filter: { path: string[]; op: '==' | '!='; value: unknown } };

export function parseJsonPath(expr: string): Step[] {
  let s = expr.trim();
  if (s.startsWith('{') && s.endsWith('}')) s = s.slice(1, -1);
  if (s.startsWith('$')) s = s.slice(1);
  const steps: Step[] = [];
  let i = 0;
  while (i < s.length) {
    if (s[i] === '.') {
      const m = /^\.([A-Za-z0-9_\-$]+)/.exec(s.slice(i));
      if (!m) throw new Error(`invalid JSONPath ${expr} at ${i}`);
      steps.push({ field: m[1] });
      i += m[0].length;
    } else if (s[i] === '[') {
      const end = s.indexOf(']', s[i + 1] === '?' ? s.indexOf(')', i) : i);
      if (end < 0) throw new Error(`invalid JSONPath ${expr}: unclosed [`);
      const inner = s.slice(i + 1, end).trim();
      i = end + 1;
      if (inner === '*') steps.push({ all: true });
      else if (/^-?\d+$/.test(inner)) steps.push({ index: Number(inner) });
      else {
        const f = /^\?\(@((?:\.[A-Za-z0-9_-]+)+)\s*(==|!=)\s*(.+)\)$/.exec(inner);
        if (!f) {
          const q = /^['"](.*)['"]$/.exec(inner);
          if (q) {
            steps.push({ field: q[1] });
            continue;
          }
          throw new Error(`unsupported JSONPath ${expr}`);
        }
        let value: unknown = f[3].trim();
        const str = /^['"](.*)['"]$/.exec(String(value));
        value = str ? str[1] : JSON.parse(String(value));
        steps.push({ filter: { path: f[1].slice(1).split('.'), op: f[2] as '==' | '!=', value } });
      }
    } else throw new Error(`invalid JSONPath ${expr} at ${i}`);
  }
  return steps;
}

function dig(v: unknown, path: string[]): unknown {
  let cur = v;
  for (const p of path) cur = isPlainObject(cur) ? cur[p] : undefined;
  return cur;
}

export function evalJsonPath(expr: string, obj: unknown): unknown[] {
  let cur: unknown[] = [obj];
  for (const st of parseJsonPath(expr)) {
    const next: unknown[] = [];
    for (const v of cur) {
      if ('field' in st) {
        if (isPlainObject(v) && v[st.field] !== undefined) next.push(v[st.field]);
      } else if ('index' in st) {
        if (Array.isArray(v)) {
          const e = v[st.index < 0 ? v.length + st.index : st.index];
          if (e !== undefined) next.push(e);
        }
      } else if ('all' in st) {
        if (Array.isArray(v)) next.push(...v);
        else if (isPlainObject(v)) next.push(...Object.values(v));
      } else if (Array.isArray(v)) {
        const { path, op, value } = st.filter;
        for (const e of v) {
          const eq = dig(e, path) === value;
          if (op === '==' ? eq : !eq) next.push(e);
        }
      }
    }
    cur = next;
  }
  return cur;
}
