// What a benchmark started (processes, clients) stops with it, however the benchmark stops: at
// its end, on an error, on SIGINT/SIGTERM/SIGHUP sent to it alone (not to its process group, so
// its children are not signalled too), or when its output is closed (`| head`: the next write
// fails with EPIPE). Parts are stopped once, newest first; a synchronous last resort at process
// exit SIGKILLs whatever has not stopped and every child process still there (one started by a
// step that had not returned yet, say a LocalCluster still starting).
// Also the benchmarks' command line: --help prints the usage, anything else is refused.
import { readdirSync, readFileSync } from 'node:fs';

interface Part {
  name: string;
  stop: () => Promise<void>;
  /** Synchronous: may run in the 'exit' handler. */
  kill: () => void;
}

const SIGNALS = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as const;

export class BenchLifecycle {
  private readonly parts: Part[] = [];
  private stopping: Promise<void> | undefined;

  constructor(private readonly program: string) {
    for (const [sig, n] of Object.entries(SIGNALS)) process.on(sig, () => void this.exit(128 + n, `${sig} received`));
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') void this.exit(1, 'its output was closed');
      else void this.exit(1, `cannot write its output: ${e.message}`);
    });
    process.on('exit', () => {
      for (const p of this.parts.splice(0).reverse()) p.kill();
      killChildrenNow(); // also those of a step that had not returned yet (a cluster still starting)
    });
  }

  /** Registers something started: `stop` ends it gracefully, `kill` at once (synchronously). */
  own(name: string, stop: () => Promise<void>, kill: () => void = () => {}): void {
    this.parts.push({ name, stop, kill });
  }

  /** Stops every part, newest first, once (later calls get the same promise); never rejects. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      while (this.parts.length > 0) {
        const p = this.parts[this.parts.length - 1];
        try {
          await p.stop();
        } catch (e) {
          process.stderr.write(`${this.program}: stopping ${p.name}: ${(e as Error).message}\n`);
          p.kill();
        }
        this.parts.pop();
      }
    })();
    return this.stopping;
  }

  /** Stops everything, then exits with `code`. */
  async exit(code: number, why?: string): Promise<never> {
    if (why) process.stderr.write(`${this.program}: ${why}; stopping what it started\n`);
    await this.stop();
    process.exit(code);
  }
}

/**
 * The benchmarks take no arguments: `--help`/`-h` prints `usage` and exits 0; anything else exits
 * 2 naming it. `allowed` lists internal arguments (e.g. a child's role) that pass through.
 */
export function benchArgs(program: string, usage: string, argv: readonly string[], allowed: readonly string[] = []): void {
  for (const a of argv) {
    if (a === '--help' || a === '-h') {
      process.stdout.write(usage.endsWith('\n') ? usage : `${usage}\n`);
      process.exit(0);
    }
    if (!allowed.includes(a)) {
      process.stderr.write(`${program}: unexpected argument "${a}" (settings are environment variables; --help lists them)\n`);
      process.exit(2);
    }
  }
}

/** SIGKILLs every direct child of this process now (Linux /proc): the last resort at exit. */
export function killChildrenNow(): void {
  let tasks: string[] = [];
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return; // no /proc: the parts' own kill() is all there is
  }
  for (const t of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/self/task/${t}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const pid of children.split(' ').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
