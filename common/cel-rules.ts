// CEL (Common Expression Language) as Kubernetes uses it in CRD x-kubernetes-validations rules and
// webhook matchConditions, on @marcbachmann/cel-js: expressions are type-checked once (a function
// the library lacks, such as Kubernetes' quantity() or url(), makes the expression unsupported,
// reported as 'skip' rather than enforced wrongly) and evaluated over JSON values whose whole
// numbers become CEL ints (JSON cannot tell 1 from 1.0; Kubernetes types them by the schema).
// Shared by the operator (the CRDs' own rules) and the test API server.
import { Environment } from '@marcbachmann/cel-js';

const env = new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false });

type Program = (ctx: Record<string, unknown>) => unknown;
const cache = new Map<string, Program | null>();

function compile(expr: string): Program | null {
  let p = cache.get(expr);
  if (p === undefined) {
    p = null;
    try {
      if (env.check(expr).valid) p = env.parse(expr);
    } catch {
      // A syntax error: unsupported, like an unknown function.
    }
    cache.set(expr, p);
  }
  return p;
}

/** JSON to CEL values: whole numbers as int (bigint), recursively. */
function toCel(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(toCel);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = toCel(x);
    return out;
  }
  return v;
}

/** Evaluates a boolean expression over named variables: true, false, 'error' (runtime), or 'skip'. */
export function evalExpression(expr: string, vars: Record<string, unknown>): boolean | 'error' | 'skip' {
  const program = compile(expr);
  if (!program) return 'skip';
  const ctx: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(vars)) ctx[k] = toCel(v);
  try {
    return program(ctx) === true;
  } catch {
    return 'error';
  }
}

/**
 * Evaluates a validation rule: true, false (violated, or an evaluation error such as a missing
 * field, which fails the rule as in Kubernetes), or 'skip' (not supported).
 */
export function evalRule(rule: string, self: unknown, oldSelf: unknown): boolean | 'skip' {
  const vars: Record<string, unknown> = { self };
  if (oldSelf !== undefined) vars.oldSelf = oldSelf;
  const r = evalExpression(rule, vars);
  return r === 'error' ? false : r;
}

/** Whether a rule can be evaluated (parses and uses only functions the library has). */
export function isSupportedRule(rule: string): boolean {
  return compile(rule) !== null;
}
