// Argument parsing of the `store` CLI: the command table (synopsis, options, help text of each
// command) and the parse of argv into one Invocation. Pure: no I/O, the environment is a
// parameter. Options are parsed by node:util's parseArgs (strict: an unknown option, a missing
// value or a surplus argument is a UsageError, exit 2); values are checked here (sizes, counts,
// durations) so the commands get typed values.
import { parseArgs } from 'node:util';
import { parseDuration } from '../common/duration.js';
import { parseSize } from '../common/size.js';
import { HelpShown, UsageError } from './cli-errors.js';

type OptionType = 'string' | 'boolean';

interface OptionSpec {
  type: OptionType;
  short?: string;
  /** Shown in help: the value's placeholder (strings) and what it does. */
  value?: string;
  help: string;
}

export interface CommandSpec {
  name: string;
  /** Positional arguments as shown in usage, e.g. "KEY FILE|-". */
  args: string;
  minArgs: number;
  maxArgs: number;
  summary: string;
  /** More lines for `store COMMAND --help`. */
  details: string[];
  options: Record<string, OptionSpec>;
}

/** Options every command takes. */
export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  master: { type: 'string', value: 'ADDR', help: 'master RPC address: host:port, etcd://h:p;h:p[/cluster] or redis://h:p[/cluster] (default $STORE_MASTER_ADDRESS)' },
  'master-http': { type: 'string', value: 'URL', help: "master's HTTP admin address, http://host:port (default $STORE_MASTER_HTTP_ADDRESS, else the master's host on port 9003)" },
  metadata: { type: 'string', value: 'ADDR', help: 'transfer-engine metadata service for put/get (default $STORE_METADATA_SERVER, else P2PHANDSHAKE)' },
  timeout: { type: 'string', value: 'DURATION', help: 'per-request timeout, e.g. 5s, 500ms (default 10s)' },
  cluster_secret_file: { type: 'string', value: 'FILE', help: 'the cluster secret proven to the master and store services (default $STORE_CLUSTER_SECRET_FILE)' },
  json: { type: 'boolean', help: 'print one JSON document on stdout' },
  quiet: { type: 'boolean', short: 'q', help: 'no progress bar' },
  help: { type: 'boolean', short: 'h', help: 'show help' },
};

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'put',
    args: 'KEY FILE|-',
    minArgs: 2,
    maxArgs: 2,
    summary: 'store the bytes of FILE (- = stdin) under KEY',
    details: [
      'Through an embedded pure client (it contributes no memory). A FILE is read straight into',
      'registered memory sized for it; stdin is read whole first. Values up to 4 GiB - 1 byte.',
    ],
    options: {
      replicas: { type: 'string', value: 'N', help: 'replicas to write (default 1)' },
      'soft-pin': { type: 'boolean', help: 'soft-pin the object (evicted last)' },
      'hard-pin': { type: 'boolean', help: 'hard-pin the object (never evicted)' },
      segment: { type: 'string', value: 'NAME', help: 'preferred segment for the first replica' },
      upsert: { type: 'boolean', help: 'replace the object if KEY exists (default: fail with exit 4)' },
    },
  },
  {
    name: 'get',
    args: 'KEY [FILE|-]',
    minArgs: 1,
    maxArgs: 2,
    summary: 'write the value of KEY to FILE (default - = stdout)',
    details: ['Exit 1 when KEY does not exist. With --json the value must go to a FILE.'],
    options: {},
  },
  {
    name: 'rm',
    args: 'KEY',
    minArgs: 1,
    maxArgs: 1,
    summary: 'remove KEY',
    details: ['Waits (up to --timeout) while a read lease holds the object. Exit 1 when KEY does not exist, 4 when still leased.'],
    options: { force: { type: 'boolean', help: 'also remove a hard-pinned object' } },
  },
  {
    name: 'ls',
    args: '[REGEX]',
    minArgs: 0,
    maxArgs: 1,
    summary: 'list the keys (matching REGEX, a JavaScript regular expression)',
    details: ["Streams the master's /get_all_keys and filters it here: any number of keys."],
    options: {},
  },
  {
    name: 'stat',
    args: 'KEY',
    minArgs: 1,
    maxArgs: 1,
    summary: "size and replicas of KEY (segments, endpoints), from the master's /query_key",
    details: ['Takes no lease. Exit 1 when KEY does not exist.'],
    options: {},
  },
  {
    name: 'segments',
    args: '',
    minArgs: 0,
    maxArgs: 0,
    summary: "the master's segments: name, size, used, endpoint, state",
    details: [],
    options: {},
  },
  {
    name: 'health',
    args: '',
    minArgs: 0,
    maxArgs: 0,
    summary: 'is the master reachable and serving: leader, segments',
    details: ['Exit 0 healthy, 3 unreachable (or no leader elected), 4 reachable but not serving.'],
    options: {},
  },
  {
    name: 'mount',
    args: 'SIZE',
    minArgs: 1,
    maxArgs: 1,
    summary: 'mount SIZE bytes (e.g. 4GB) as segments of a store service (its REST /api/mount)',
    details: ['With --shm NAME the memory is that POSIX shm object (/api/mount_shm), from --offset.'],
    options: {
      service: { type: 'string', value: 'URL', help: 'store service HTTP address (default $STORE_SERVICE_HTTP_ADDRESS, else http://127.0.0.1:8080)' },
      shm: { type: 'string', value: 'NAME', help: 'mount an existing POSIX shm object instead of memory of the service' },
      offset: { type: 'string', value: 'SIZE', help: 'offset in the shm object (a multiple of 4096; default 0)' },
      location: { type: 'string', value: 'TEXT', help: "a free-form hint shown in the service's /segments" },
    },
  },
  {
    name: 'unmount',
    args: 'ID...',
    minArgs: 1,
    maxArgs: 1024,
    summary: 'unmount segments a store service mounted through its REST API',
    details: ["Each ID is looked up in the service's /segments; exit 1 for an unknown ID (nothing is unmounted)."],
    options: {
      service: { type: 'string', value: 'URL', help: 'store service HTTP address (default $STORE_SERVICE_HTTP_ADDRESS, else http://127.0.0.1:8080)' },
      grace: { type: 'string', value: 'SECONDS', help: 'readable but closed to new objects this long first (default 0)' },
    },
  },
  {
    name: 'task',
    args: 'copy KEY SEGMENT... | move KEY SOURCE TARGET | query ID',
    minArgs: 2,
    maxArgs: 66,
    summary: "the master's copy and move tasks: queue one (prints its id) or show one",
    details: [
      'copy gives KEY a replica on each SEGMENT; move puts its replica on SOURCE onto TARGET (docs/tiers.md).',
      'With --wait, waits within --timeout until the task finished; exit 4 when it failed, 1 for an unknown ID.',
    ],
    options: { wait: { type: 'boolean', help: 'wait until the task finished and print it' } },
  },
  {
    name: 'secret',
    args: 'new FILE',
    minArgs: 2,
    maxArgs: 2,
    summary: 'write a new cluster secret to FILE (64 hex characters, mode 0600; never overwrites)',
    details: ['Give every process of the cluster --cluster_secret_file=FILE or STORE_CLUSTER_SECRET_FILE=FILE (docs/threat-model.md).'],
    options: {},
  },
  {
    name: 'top',
    args: '',
    minArgs: 0,
    maxArgs: 0,
    summary: "a live view of the master's metrics, refreshed every second",
    details: ['Rates come from two successive scrapes of /metrics. On a non-terminal (or with --once) one frame is printed.'],
    options: {
      once: { type: 'boolean', help: 'print one frame (two scrapes --interval apart) and exit' },
      interval: { type: 'string', value: 'DURATION', help: 'time between scrapes (default 1s)' },
    },
  },
];

export interface GlobalOptions {
  master?: string;
  /** --cluster_secret_file (else STORE_CLUSTER_SECRET_FILE). */
  clusterSecretFile?: string;
  masterHttp?: string;
  metadata?: string;
  timeoutMs: number;
  json: boolean;
  quiet: boolean;
}

export interface Invocation {
  command: string;
  args: string[];
  /** The command's own options as parsed (strings and booleans). */
  options: Record<string, string | boolean | undefined>;
  global: GlobalOptions;
}

const DEFAULT_TIMEOUT_MS = 10_000;

function optionLines(opts: Record<string, OptionSpec>): string[] {
  return Object.entries(opts).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.value ? ` ${o.value}` : ''}`;
    return `  ${flag.padEnd(28)} ${o.help}`;
  });
}

/** `store --help`. */
export function toolHelp(): string {
  const lines = ['Usage: store COMMAND [ARGS] [OPTIONS]', '', 'Commands:'];
  for (const c of COMMANDS) lines.push(`  ${`${c.name} ${c.args}`.padEnd(24)} ${c.summary}`);
  lines.push('', 'Options of every command:', ...optionLines(GLOBAL_OPTIONS));
  lines.push('', 'Exit codes: 0 ok, 1 not found, 2 usage, 3 unreachable, 4 other store error, 5 local file error.');
  lines.push("`store COMMAND --help` shows a command's own options. docs/cli.md has the details.", '');
  return lines.join('\n');
}

/** `store COMMAND --help`. */
export function commandHelp(c: CommandSpec): string {
  const lines = [`Usage: store ${c.name}${c.args ? ' ' + c.args : ''} [OPTIONS]`, '', c.summary + '.', ...c.details];
  if (Object.keys(c.options).length) lines.push('', 'Options:', ...optionLines(c.options));
  lines.push('', 'Options of every command:', ...optionLines(GLOBAL_OPTIONS), '');
  return lines.join('\n');
}

/** Parses argv (without node and the script). Throws UsageError, or HelpShown for --help. */
export function parseCommandLine(argv: readonly string[]): Invocation {
  const first = commandIndex(argv);
  if (first < 0) {
    if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) throw new HelpShown(toolHelp());
    throw new UsageError(`no command given (one of ${COMMANDS.map((c) => c.name).join(', ')}); see store --help`);
  }
  const name = argv[first];
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) throw new UsageError(`unknown command "${name}" (one of ${COMMANDS.map((c) => c.name).join(', ')}); see store --help`);
  const rest = [...argv.slice(0, first), ...argv.slice(first + 1)];
  const options = { ...GLOBAL_OPTIONS, ...spec.options };
  let parsed: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: rest,
      options: Object.fromEntries(Object.entries(options).map(([k, o]) => [k, o.short ? { type: o.type, short: o.short } : { type: o.type }])),
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(`${(e as Error).message.split('\n')[0]}; see store ${name} --help`);
  }
  const v = parsed.values;
  if (v.help) throw new HelpShown(commandHelp(spec));
  const args = parsed.positionals;
  if (args.length < spec.minArgs) throw new UsageError(`missing argument: store ${name} ${spec.args}`);
  if (args.length > spec.maxArgs) throw new UsageError(`too many arguments (${args.length}): store ${name} ${spec.args}`);
  const global: GlobalOptions = {
    master: str(v.master),
    clusterSecretFile: str(v.cluster_secret_file),
    masterHttp: str(v['master-http']),
    metadata: str(v.metadata),
    timeoutMs: typeof v.timeout === 'string' ? durationMs('--timeout', v.timeout, 1) : DEFAULT_TIMEOUT_MS,
    json: v.json === true,
    quiet: v.quiet === true,
  };
  const own: Record<string, string | boolean | undefined> = {};
  for (const k of Object.keys(spec.options)) own[k] = single(v[k]);
  return { command: name, args, options: own, global };
}

/** Where the command is: the first positional, skipping the values of options that take one. */
function commandIndex(argv: readonly string[]): number {
  const all: Record<string, OptionSpec> = { ...GLOBAL_OPTIONS };
  for (const c of COMMANDS) Object.assign(all, c.options);
  const { tokens } = parseArgs({
    args: [...argv],
    options: Object.fromEntries(Object.entries(all).map(([k, o]) => [k, o.short ? { type: o.type, short: o.short } : { type: o.type }])),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const t = tokens.find((x) => x.kind === 'positional' || x.kind === 'option-terminator');
  return t?.kind === 'positional' ? t.index : -1;
}

/** No option is declared `multiple`: parseArgs gives one value each. */
function single(v: string | boolean | (string | boolean)[] | undefined): string | boolean | undefined {
  return Array.isArray(v) ? v[v.length - 1] : v;
}

function str(v: string | boolean | (string | boolean)[] | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** A duration option in ms (bare numbers in seconds), at least `min` ms. */
export function durationMs(flag: string, text: string, min: number): number {
  let ms: number;
  try {
    ms = parseDuration(text, 's');
  } catch (e) {
    throw new UsageError(`${flag} ${text}: ${(e as Error).message}`);
  }
  if (!(ms >= min)) throw new UsageError(`${flag} ${text}: must be at least ${min} ms`);
  return ms;
}

/** A size argument or option in bytes (4GB, 512MB, 4096), within [min, max]. */
export function sizeArg(what: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  let n: number;
  try {
    n = parseSize(text);
  } catch (e) {
    throw new UsageError(`${what} "${text}": ${(e as Error).message}`);
  }
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`${what} "${text}": must be between ${min} and ${max} bytes`);
  return n;
}

/** A whole number option within [min, max]. */
export function intArg(what: string, text: string, min: number, max: number): number {
  if (!/^[0-9]+$/.test(text.trim())) throw new UsageError(`${what} "${text}": expected a whole number`);
  const n = Number(text.trim());
  if (n < min || n > max) throw new UsageError(`${what} "${text}": must be between ${min} and ${max}`);
  return n;
}
