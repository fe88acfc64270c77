// gflags-style command-line flags: a table of typed flag specs, parsed from argv and an optional
// JSON/YAML config file (--config_path), command line overriding the file. Any binary declares
// its own table (store_master in master/master-flags.ts); errors name the flag and callers exit 2.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { parseDuration, type DurationUnit } from './duration.js';
import { parseSize } from './size.js';

export type FlagKind = 'bool' | 'int' | 'float' | 'string' | 'duration' | 'size' | 'enum';
export type FlagValue = boolean | number | string;

export interface FlagSpec {
  /** Canonical snake_case name; `--a-b` and `--a_b` both match it. */
  name: string;
  kind: FlagKind;
  /** Default value, already in the parsed type (durations in ms, sizes in bytes). */
  default: FlagValue;
  help: string;
  /** Shown in usage and docs instead of the raw default, e.g. "min(4, CPU cores)". */
  defaultText?: string;
  /** duration: the unit of a bare number. The parsed value is always milliseconds. */
  unit?: DurationUnit;
  /** enum: the accepted values (case-sensitive). */
  values?: readonly string[];
  min?: number;
  max?: number;
  group?: string;
}

/** A flag problem; `flag` is the name as the user spelled it. */
export class FlagError extends Error {
  override readonly name = 'FlagError';
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
  }
}

/** Asked for --help: callers print `usage` and exit 0. */
export class HelpRequested extends Error {
  override readonly name = 'HelpRequested';
  constructor(readonly usage: string) {
    super('help requested');
  }
}

export interface ParsedFlags {
  values: Record<string, FlagValue>;
  /** Canonical names set on the command line or in the config file. */
  explicit: Set<string>;
  /** The config file read, if any. */
  configPath?: string;
}

const CONFIG_PATH = 'config_path';
const trueWords = new Set(['true', '1', 'yes', 'on', 't', 'y']);
const falseWords = new Set(['false', '0', 'no', 'off', 'f', 'n']);

function canonical(name: string): string {
  return name.replace(/-/g, '_');
}

export class FlagTable {
  private readonly specs = new Map<string, FlagSpec>();

  /**
   * `opts.configPath: false` leaves out the generic --config_path (a binary whose own config-file
   * flag reads another format, as store_service's --config reads the spec's JSON: two flags for
   * one file would only confuse).
   */
  constructor(
    readonly program: string,
    specs: readonly FlagSpec[],
    opts: { configPath?: boolean } = {},
  ) {
    for (const s of specs) {
      if (this.specs.has(s.name)) throw new Error(`flag --${s.name} declared twice`);
      this.specs.set(s.name, s);
    }
    if (opts.configPath !== false && !this.specs.has(CONFIG_PATH)) {
      this.specs.set(CONFIG_PATH, {
        name: CONFIG_PATH,
        kind: 'string',
        default: '',
        help: 'JSON or YAML file holding flags as keys; the command line overrides it',
        group: 'General',
      });
    }
  }

  all(): FlagSpec[] {
    return [...this.specs.values()];
  }

  spec(name: string): FlagSpec | undefined {
    return this.specs.get(canonical(name));
  }

  /** Parses argv (without node and script). Throws FlagError or HelpRequested. */
  parse(argv: readonly string[], readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): ParsedFlags {
    const cli = new Map<string, FlagValue>();
    for (let i = 0; i < argv.length; i++) {
      const arg = argv[i];
      if (!arg.startsWith('-') || arg === '-' || arg === '--') {
        throw new FlagError(arg, `unexpected argument "${arg}": flags are written --name=value`);
      }
      const body = arg.replace(/^--?/, '');
      const eq = body.indexOf('=');
      const rawName = eq < 0 ? body : body.slice(0, eq);
      let text: string | undefined = eq < 0 ? undefined : body.slice(eq + 1);
      if (rawName === 'help' || rawName === 'h') throw new HelpRequested(this.usage());
      let spec = this.specs.get(canonical(rawName));
      if (!spec && text === undefined && rawName.startsWith('no')) {
        // gflags: --noflag sets a boolean to false
        const negated = this.specs.get(canonical(rawName.slice(2)));
        if (negated?.kind === 'bool') {
          spec = negated;
          text = 'false';
        }
      }
      if (!spec) throw new FlagError(`--${rawName}`, `unknown flag --${rawName}${this.suggest(rawName)}`);
      if (text === undefined) {
        if (spec.kind === 'bool') text = 'true';
        else {
          if (i + 1 >= argv.length) throw new FlagError(`--${rawName}`, `flag --${rawName} needs a value (${describeKind(spec)})`);
          text = argv[++i];
        }
      }
      cli.set(spec.name, this.convert(spec, text, `--${rawName}`));
    }

    const values: Record<string, FlagValue> = {};
    for (const s of this.specs.values()) values[s.name] = s.default;
    const explicit = new Set<string>();

    const configPath = cli.get(CONFIG_PATH) as string | undefined;
    if (configPath) {
      for (const [name, v] of this.readConfig(configPath, readFile)) {
        values[name] = v;
        explicit.add(name);
      }
    }
    for (const [name, v] of cli) {
      values[name] = v;
      explicit.add(name);
    }
    return { values, explicit, configPath: configPath || undefined };
  }

  /** Parses one value for a flag: the same rules for the command line and the config file. */
  convert(spec: FlagSpec, text: string, shown = `--${spec.name}`): FlagValue {
    const fail = (why: string): never => {
      throw new FlagError(shown, `invalid value "${text}" for flag ${shown}: ${why}`);
    };
    let v: FlagValue;
    switch (spec.kind) {
      case 'bool': {
        const t = text.trim().toLowerCase();
        if (trueWords.has(t)) v = true;
        else if (falseWords.has(t)) v = false;
        else return fail('expected true or false');
        break;
      }
      case 'int':
        if (!/^-?[0-9]+$/.test(text.trim())) return fail('expected an integer');
        v = Number(text.trim());
        if (!Number.isSafeInteger(v)) return fail('integer out of range');
        break;
      case 'float':
        v = Number(text.trim());
        if (text.trim() === '' || !Number.isFinite(v)) return fail('expected a number');
        break;
      case 'duration':
        try {
          v = parseDuration(text, spec.unit ?? 'ms');
        } catch (e) {
          return fail((e as Error).message);
        }
        break;
      case 'size':
        try {
          v = parseSize(text);
        } catch (e) {
          return fail((e as Error).message);
        }
        break;
      case 'enum':
        if (!spec.values?.includes(text)) return fail(`accepted values: ${spec.values?.join(', ')}`);
        v = text;
        break;
      case 'string':
        v = text;
        break;
    }
    if (typeof v === 'number') {
      if (spec.min !== undefined && v < spec.min) return fail(`must be >= ${spec.min}`);
      if (spec.max !== undefined && v > spec.max) return fail(`must be <= ${spec.max}`);
    }
    return v;
  }

  private readConfig(path: string, readFile: (path: string) => string): Map<string, FlagValue> {
    let text: string;
    try {
      text = readFile(path);
    } catch (e) {
      throw new FlagError('--config_path', `cannot read --config_path=${path}: ${(e as Error).message}`);
    }
    let doc: unknown;
    try {
      // YAML is a superset of JSON, but JSON files get JSON's stricter parser and error messages.
      doc = /\.json$/i.test(path) || text.trimStart().startsWith('{') ? JSON.parse(text) : yaml.load(text);
    } catch (e) {
      throw new FlagError('--config_path', `cannot parse --config_path=${path}: ${(e as Error).message.split('\n')[0]}`);
    }
    if (doc === undefined || doc === null) return new Map();
    if (typeof doc !== 'object' || Array.isArray(doc)) {
      throw new FlagError('--config_path', `--config_path=${path} must hold a mapping of flag names to values`);
    }
    const out = new Map<string, FlagValue>();
    for (const [key, raw] of Object.entries(doc as Record<string, unknown>)) {
      const spec = this.specs.get(canonical(key));
      const shown = `${key} (in ${path})`;
      if (!spec || spec.name === CONFIG_PATH) throw new FlagError(key, `unknown flag ${shown}${this.suggest(key)}`);
      if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean') {
        throw new FlagError(key, `invalid value for flag ${shown}: expected a scalar (${describeKind(spec)})`);
      }
      out.set(spec.name, this.convert(spec, String(raw), shown));
    }
    return out;
  }

  private suggest(name: string): string {
    const c = canonical(name);
    const close = [...this.specs.keys()].filter((k) => k.includes(c) || c.includes(k));
    return close.length > 0 && close.length <= 3 ? ` (did you mean ${close.map((k) => `--${k}`).join(', ')}?)` : '';
  }

  /** A help text: one line per flag with type and default, grouped. */
  usage(): string {
    const lines = [`Usage: ${this.program} [--flag=value ...]`, ''];
    const groups = new Map<string, FlagSpec[]>();
    for (const s of this.specs.values()) {
      const g = s.group ?? 'General';
      groups.set(g, [...(groups.get(g) ?? []), s]);
    }
    for (const [g, specs] of groups) {
      lines.push(`${g}:`);
      for (const s of specs) {
        lines.push(`  --${s.name} (${describeKind(s)}; default: ${defaultText(s)})`);
        lines.push(`      ${s.help}`);
      }
      lines.push('');
    }
    return lines.join('\n');
  }
}

export function defaultText(s: FlagSpec): string {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.kind === 'duration') return `${s.default}ms`;
  if (s.kind === 'string' && s.default === '') return '""';
  return String(s.default);
}

export function describeKind(s: FlagSpec): string {
  switch (s.kind) {
    case 'enum':
      return `one of ${s.values?.join('|')}`;
    case 'duration':
      return `duration, e.g. 5000ms, 5s, 30m, 1h; bare numbers in ${s.unit === 's' ? 'seconds' : 'ms'}`;
    case 'size':
      return 'size, e.g. 4GB, 512MB, 4096';
    default:
      return s.kind;
  }
}
