// glog-style logger: severity-prefixed lines to stderr, or with --log_dir to one file per process
// named <program>.INFO.<YYYYMMDD>-<HHMMSS>.<pid> (all severities) with a stable symlink
// <program>.INFO, rotated past --max_log_size MB. Errors are copied to stderr as glog does.
import { closeSync, existsSync, mkdirSync, openSync, symlinkSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { FlagError, type FlagSpec, type FlagValue } from './flags.js';

export const LogLevel = { DEBUG: 0, INFO: 1, WARNING: 2, ERROR: 3 } as const;
export type LogLevel = (typeof LogLevel)[keyof typeof LogLevel];
const letters = ['D', 'I', 'W', 'E'];

export interface LoggerOptions {
  program: string;
  /** Directory of the log file; empty: stderr only. */
  logDir?: string;
  /** Rotate the file after this many MB (0: never). */
  maxLogSizeMb?: number;
  /** Log to stderr only, even with logDir (glog --logtostderr). */
  logToStderr?: boolean;
  minLevel?: LogLevel;
  /** Where stderr lines go; tests capture it. */
  stderr?: (line: string) => void;
}

/** The standard logging flags, for any binary's flag table. */
export const loggingFlags: FlagSpec[] = [
  { name: 'log_dir', kind: 'string', default: '', help: 'write all severities to <program>.INFO.<date>-<time>.<pid> in this directory (symlink <program>.INFO)', group: 'Logging' },
  { name: 'max_log_size', kind: 'int', default: 1800, min: 1, help: 'rotate the log file after this many MB', group: 'Logging' },
  { name: 'logtostderr', kind: 'bool', default: false, help: 'log to stderr only, even when --log_dir is set', group: 'Logging' },
  {
    name: 'minloglevel',
    kind: 'int',
    default: 0,
    min: 0,
    max: 3,
    help: 'drop messages below this level: 0 INFO (and DEBUG when --v>0), 1 WARNING, 2 ERROR, 3 none but ERROR',
    group: 'Logging',
  },
  { name: 'v', kind: 'int', default: 0, min: 0, help: 'verbose logging level; > 0 enables DEBUG messages', group: 'Logging' },
];

export function loggerOptionsFromFlags(program: string, v: Record<string, FlagValue>): LoggerOptions {
  const minloglevel = v.minloglevel as number;
  const min = (v.v as number) > 0 && minloglevel === 0 ? LogLevel.DEBUG : (Math.min(3, minloglevel + 1) as LogLevel);
  return { program, logDir: v.log_dir as string, maxLogSizeMb: v.max_log_size as number, logToStderr: v.logtostderr as boolean, minLevel: min };
}

/**
 * The Logger the flags ask for. A --log_dir that cannot be created or written is a FlagError
 * naming the flag (the program exits 2 with one line), not a crash with a stack trace.
 */
export function loggerFromFlags(program: string, v: Record<string, FlagValue>): Logger {
  const opts = loggerOptionsFromFlags(program, v);
  try {
    return new Logger(opts);
  } catch (e) {
    throw new FlagError('--log_dir', `cannot write logs to --log_dir=${opts.logDir}: ${(e as Error).message}`);
  }
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

export class Logger {
  private fd = -1;
  private written = 0;
  private readonly minLevel: LogLevel;
  private readonly stderr: (line: string) => void;
  /** Path of the current log file, when logging to a file. */
  file: string | undefined;

  constructor(private readonly opts: LoggerOptions) {
    this.minLevel = opts.minLevel ?? LogLevel.INFO;
    this.stderr = opts.stderr ?? ((line) => process.stderr.write(line));
    if (opts.logDir && !opts.logToStderr) {
      mkdirSync(opts.logDir, { recursive: true });
      this.openFile(new Date());
    }
  }

  debug(msg: string): void {
    this.log(LogLevel.DEBUG, msg);
  }
  info(msg: string): void {
    this.log(LogLevel.INFO, msg);
  }
  warn(msg: string): void {
    this.log(LogLevel.WARNING, msg);
  }
  error(msg: string): void {
    this.log(LogLevel.ERROR, msg);
  }

  enabled(level: LogLevel): boolean {
    return level >= this.minLevel;
  }

  log(level: LogLevel, msg: string): void {
    if (level < this.minLevel) return;
    const d = new Date();
    const ts = `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
    const line = `${letters[level]}${ts} ${process.pid}] ${msg}\n`;
    if (this.fd < 0) {
      this.stderr(line);
      return;
    }
    const bytes = Buffer.byteLength(line);
    const max = (this.opts.maxLogSizeMb ?? 0) * 1024 * 1024;
    if (max > 0 && this.written + bytes > max && this.written > 0) this.openFile(d);
    writeSync(this.fd, line);
    this.written += bytes;
    if (level >= LogLevel.ERROR) this.stderr(line);
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }

  private openFile(d: Date): void {
    const dir = this.opts.logDir as string;
    const base = `${this.opts.program}.INFO`;
    const stamp = `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}-${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}`;
    let name = `${base}.${stamp}.${process.pid}`;
    // Two rotations within one second would reuse the name: number the later ones.
    for (let n = 1; existsSync(join(dir, name)); n++) name = `${base}.${stamp}.${process.pid}.${n}`;
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = openSync(join(dir, name), 'a');
    this.written = 0;
    this.file = join(dir, name);
    const link = join(dir, base);
    try {
      unlinkSync(link);
    } catch {
      // no previous link
    }
    try {
      symlinkSync(name, link);
    } catch (e) {
      this.stderr(`W logger: cannot create symlink ${link}: ${(e as Error).message}\n`);
    }
  }
}
