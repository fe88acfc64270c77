// A small evaluator for the Common Expression Language subset that CRD x-kubernetes-validations
// rules use: literals, `self`/`oldSelf`, field and index access, arithmetic, comparisons, `in`,
// `&&`/`||`/`!`, `? :`, `has()`, `size()`, string methods (startsWith, endsWith, contains,
// matches), and the `all`/`exists`/`exists_one`/`map`/`filter` macros. Rules using anything else
// are reported as unsupported ('skip') and not enforced; runtime errors fail the rule, as in CEL.

type Value = unknown;
type Node =
  | { k: 'lit'; v: Value }
  | { k: 'id'; name: string }
  | { k: 'list'; items: Node[] }
  | { k: 'map'; entries: [Node, Node][] }
  | { k: 'member'; obj: Node; field: string }
  | { k: 'index'; obj: Node; idx: Node }
  | { k: 'call'; fn: string; target?: Node; args: Node[] }
  | { k: 'unary'; op: string; arg: Node }
  | { k: 'binary'; op: string; l: Node; r: Node }
  | { k: 'cond'; c: Node; t: Node; f: Node };

class Unsupported extends Error {}
class EvalError extends Error {}

const TOKEN = /\s*(?:(\d+\.\d+(?:[eE][+-]?\d+)?|\d+[uU]?)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([A-Za-z_][A-Za-z0-9_]*)|(&&|\|\||==|!=|<=|>=|[-+*/%<>!?:.,()[\]{}]))/y;

function tokenize(src: string): string[] {
  const out: string[] = [];
  TOKEN.lastIndex = 0;
  let pos = 0;
  while (pos < src.length) {
    if (/^\s*$/.test(src.slice(pos))) break;
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(src);
    if (!m) throw new Unsupported(`cannot tokenize at ${pos}`);
    out.push(m[0].trim());
    pos = TOKEN.lastIndex;
  }
  return out;
}

const MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

class Parser {
  private i = 0;
  constructor(private readonly toks: string[]) {}
  private peek(): string | undefined {
    return this.toks[this.i];
  }
  private next(): string {
    const t = this.toks[this.i++];
    if (t === undefined) throw new Unsupported('unexpected end');
    return t;
  }
  private expect(t: string): void {
    if (this.next() !== t) throw new Unsupported(`expected ${t}`);
  }
  parse(): Node {
    const n = this.cond();
    if (this.i !== this.toks.length) throw new Unsupported(`trailing ${this.peek()}`);
    return n;
  }
  private cond(): Node {
    const c = this.or();
    if (this.peek() !== '?') return c;
    this.next();
    const t = this.cond();
    this.expect(':');
    return { k: 'cond', c, t, f: this.cond() };
  }
  private binaryLevel(ops: string[], sub: () => Node): Node {
    let l = sub();
    while (ops.includes(this.peek() ?? '')) {
      const op = this.next();
      l = { k: 'binary', op, l, r: sub() };
    }
    return l;
  }
  private or = (): Node => this.binaryLevel(['||'], this.and);
  private and = (): Node => this.binaryLevel(['&&'], this.rel);
  private rel = (): Node => this.binaryLevel(['==', '!=', '<', '<=', '>', '>=', 'in'], this.add);
  private add = (): Node => this.binaryLevel(['+', '-'], this.mul);
  private mul = (): Node => this.binaryLevel(['*', '/', '%'], this.unary);
  private unary = (): Node => {
    const t = this.peek();
    if (t === '!' || t === '-') {
      this.next();
      return { k: 'unary', op: t, arg: this.unary() };
    }
    return this.postfix();
  };
  private args(): Node[] {
    const out: Node[] = [];
    if (this.peek() === ')') {
      this.next();
      return out;
    }
    for (;;) {
      out.push(this.cond());
      const t = this.next();
      if (t === ')') return out;
      if (t !== ',') throw new Unsupported('expected , or )');
    }
  }
  private postfix(): Node {
    let n = this.primary();
    for (;;) {
      const t = this.peek();
      if (t === '.') {
        this.next();
        const field = this.next();
        if (this.peek() === '(') {
          this.next();
          n = { k: 'call', fn: field, target: n, args: this.args() };
        } else n = { k: 'member', obj: n, field };
      } else if (t === '[') {
        this.next();
        const idx = this.cond();
        this.expect(']');
        n = { k: 'index', obj: n, idx };
      } else return n;
    }
  }
  private primary(): Node {
    const t = this.next();
    if (t === '(') {
      const n = this.cond();
      this.expect(')');
      return n;
    }
    if (t === '[') {
      const items: Node[] = [];
      while (this.peek() !== ']') {
        items.push(this.cond());
        if (this.peek() === ',') this.next();
      }
      this.next();
      return { k: 'list', items };
    }
    if (t === '{') {
      const entries: [Node, Node][] = [];
      while (this.peek() !== '}') {
        const key = this.cond();
        this.expect(':');
        entries.push([key, this.cond()]);
        if (this.peek() === ',') this.next();
      }
      this.next();
      return { k: 'map', entries };
    }
    if (/^\d/.test(t)) return { k: 'lit', v: Number(t.replace(/[uU]$/, '')) };
    if (/^["']/.test(t)) return { k: 'lit', v: JSON.parse(`"${t.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) };
    if (t === 'true' || t === 'false') return { k: 'lit', v: t === 'true' };
    if (t === 'null') return { k: 'lit', v: null };
    if (/^[A-Za-z_]/.test(t)) {
      if (this.peek() === '(') {
        this.next();
        return { k: 'call', fn: t, args: this.args() };
      }
      return { k: 'id', name: t };
    }
    throw new Unsupported(`unexpected ${t}`);
  }
}

function isObj(v: Value): v is Record<string, Value> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function equal(a: Value, b: Value): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && equal(a[k], b[k]));
  }
  return a === b;
}

function evaluate(n: Node, env: Record<string, Value>): Value {
  switch (n.k) {
    case 'lit':
      return n.v;
    case 'id':
      if (!(n.name in env)) throw new Unsupported(`unknown identifier ${n.name}`);
      return env[n.name];
    case 'list':
      return n.items.map((x) => evaluate(x, env));
    case 'map':
      return Object.fromEntries(n.entries.map(([k, v]) => [String(evaluate(k, env)), evaluate(v, env)]));
    case 'member': {
      const o = evaluate(n.obj, env);
      if (!isObj(o) || !(n.field in o)) throw new EvalError(`no such key: ${n.field}`);
      return o[n.field];
    }
    case 'index': {
      const o = evaluate(n.obj, env);
      const i = evaluate(n.idx, env);
      if (Array.isArray(o) && typeof i === 'number' && i >= 0 && i < o.length) return o[i];
      if (isObj(o) && typeof i === 'string' && i in o) return o[i];
      throw new EvalError(`no such key: ${String(i)}`);
    }
    case 'unary': {
      const v = evaluate(n.arg, env);
      if (n.op === '!') return !truthy(v);
      if (typeof v !== 'number') throw new EvalError('no such overload');
      return -v;
    }
    case 'cond':
      return truthy(evaluate(n.c, env)) ? evaluate(n.t, env) : evaluate(n.f, env);
    case 'binary':
      return binary(n.op, n.l, n.r, env);
    case 'call':
      return call(n, env);
  }
}

function truthy(v: Value): boolean {
  if (typeof v !== 'boolean') throw new EvalError('no matching overload: expected bool');
  return v;
}

function binary(op: string, ln: Node, rn: Node, env: Record<string, Value>): Value {
  if (op === '&&' || op === '||') {
    // CEL's commutative logic: an error on one side is absorbed if the other decides the result.
    let l: Value;
    let lErr: unknown;
    try {
      l = truthy(evaluate(ln, env));
    } catch (e) {
      if (e instanceof Unsupported) throw e;
      lErr = e;
    }
    if (lErr === undefined && l === (op === '||')) return l;
    const r = truthy(evaluate(rn, env));
    if (r === (op === '||')) return r;
    if (lErr !== undefined) throw lErr as Error;
    return r;
  }
  const l = evaluate(ln, env);
  const r = evaluate(rn, env);
  switch (op) {
    case '==':
      return equal(l, r);
    case '!=':
      return !equal(l, r);
    case 'in':
      if (Array.isArray(r)) return r.some((x) => equal(x, l));
      if (isObj(r)) return typeof l === 'string' && l in r;
      throw new EvalError('no such overload: in');
  }
  if (op === '+' && typeof l === 'string' && typeof r === 'string') return l + r;
  if (op === '+' && Array.isArray(l) && Array.isArray(r)) return [...l, ...r];
  if (typeof l === 'string' && typeof r === 'string') {
    if (op === '<') return l < r;
    if (op === '<=') return l <= r;
    if (op === '>') return l > r;
    if (op === '>=') return l >= r;
  }
  if (typeof l !== 'number' || typeof r !== 'number') throw new EvalError(`no such overload: ${op}`);
  switch (op) {
    case '+':
      return l + r;
    case '-':
      return l - r;
    case '*':
      return l * r;
    case '/':
      if (r === 0) throw new EvalError('division by zero');
      return Number.isInteger(l) && Number.isInteger(r) ? Math.trunc(l / r) : l / r;
    case '%':
      if (r === 0) throw new EvalError('modulus by zero');
      return l % r;
    case '<':
      return l < r;
    case '<=':
      return l <= r;
    case '>':
      return l > r;
    case '>=':
      return l >= r;
  }
  throw new Unsupported(op);
}

function size(v: Value): number {
  if (typeof v === 'string') return [...v].length;
  if (Array.isArray(v)) return v.length;
  if (isObj(v)) return Object.keys(v).length;
  throw new EvalError('no such overload: size');
}

function call(n: Extract<Node, { k: 'call' }>, env: Record<string, Value>): Value {
  if (n.fn === 'has' && !n.target) {
    const a = n.args[0];
    if (!a || a.k !== 'member') throw new Unsupported('has() needs a field selection');
    const o = evaluate(a.obj, env);
    return isObj(o) && a.field in o;
  }
  if (n.target && MACROS.has(n.fn)) {
    const coll = evaluate(n.target, env);
    const v = n.args[0];
    if (!v || v.k !== 'id' || n.args.length !== 2) throw new Unsupported(`${n.fn} macro form`);
    const items = Array.isArray(coll) ? coll : isObj(coll) ? Object.keys(coll) : undefined;
    if (!items) throw new EvalError(`${n.fn} over a non-collection`);
    const each = (x: Value) => evaluate(n.args[1], { ...env, [v.name]: x });
    switch (n.fn) {
      case 'all':
        return items.every((x) => truthy(each(x)));
      case 'exists':
        return items.some((x) => truthy(each(x)));
      case 'exists_one':
        return items.filter((x) => truthy(each(x))).length === 1;
      case 'map':
        return items.map(each);
      case 'filter':
        return items.filter((x) => truthy(each(x)));
    }
  }
  const target = n.target ? evaluate(n.target, env) : undefined;
  const args = n.args.map((a) => evaluate(a, env));
  const str = (v: Value) => {
    if (typeof v !== 'string') throw new EvalError(`no such overload: ${n.fn}`);
    return v;
  };
  switch (n.fn) {
    case 'size':
      return size(n.target ? target : args[0]);
    case 'startsWith':
      return str(target).startsWith(str(args[0]));
    case 'endsWith':
      return str(target).endsWith(str(args[0]));
    case 'contains':
      return str(target).includes(str(args[0]));
    case 'matches':
      return new RegExp(str(n.target ? args[0] : args[1])).test(str(n.target ? target : args[0]));
    case 'int':
      if (typeof args[0] === 'string' && /^-?\d+$/.test(args[0])) return Number(args[0]);
      if (typeof args[0] === 'number') return Math.trunc(args[0]);
      throw new EvalError('int() conversion');
    case 'double':
      return Number(args[0]);
    case 'string':
      return String(args[0]);
  }
  throw new Unsupported(`function ${n.fn}`);
}

const cache = new Map<string, Node | null>();

const FUNCTIONS = new Set(['has', 'size', 'startsWith', 'endsWith', 'contains', 'matches', 'int', 'double', 'string', ...MACROS]);

/** Rejects, before any evaluation, rules that call functions outside the subset. */
function checkFunctions(n: Node): void {
  switch (n.k) {
    case 'call':
      if (!FUNCTIONS.has(n.fn)) throw new Unsupported(`function ${n.fn}`);
      if (n.target) checkFunctions(n.target);
      n.args.forEach(checkFunctions);
      return;
    case 'list':
      n.items.forEach(checkFunctions);
      return;
    case 'map':
      n.entries.forEach(([k, v]) => (checkFunctions(k), checkFunctions(v)));
      return;
    case 'member':
      return checkFunctions(n.obj);
    case 'index':
      return (checkFunctions(n.obj), checkFunctions(n.idx));
    case 'unary':
      return checkFunctions(n.arg);
    case 'binary':
      return (checkFunctions(n.l), checkFunctions(n.r));
    case 'cond':
      return (checkFunctions(n.c), checkFunctions(n.t), checkFunctions(n.f));
  }
}

function compile(rule: string): Node | null {
  if (!cache.has(rule)) {
    try {
      const ast = new Parser(tokenize(rule)).parse();
      checkFunctions(ast);
      cache.set(rule, ast);
    } catch (e) {
      if (!(e instanceof Unsupported)) throw e;
      cache.set(rule, null);
    }
  }
  return cache.get(rule)!;
}

/** Evaluates a boolean expression over named variables: true, false, 'error' (runtime), or 'skip'. */
export function evalExpression(expr: string, env: Record<string, unknown>): boolean | 'error' | 'skip' {
  const ast = compile(expr);
  if (!ast) return 'skip';
  try {
    return evaluate(ast, env) === true;
  } catch (e) {
    return e instanceof Unsupported ? 'skip' : 'error';
  }
}

/** Evaluates a validation rule: true, false (rule violated or evaluation error), or 'skip'. */
export function evalRule(rule: string, self: unknown, oldSelf: unknown): boolean | 'skip' {
  const env: Record<string, Value> = { self };
  if (oldSelf !== undefined) env.oldSelf = oldSelf;
  const r = evalExpression(rule, env);
  return r === 'error' ? false : r;
}

/** Whether a rule falls in the supported subset (for documentation and tests). */
export function isSupportedRule(rule: string): boolean {
  return compile(rule) !== null;
}
