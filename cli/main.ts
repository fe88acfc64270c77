#!/usr/bin/env node
// `store`: the command-line tool of the store (docs/cli.md). Parses the command line (args.ts),
// runs one command (commands/) and turns any failure into one line on stderr and an exit code
// (cli-errors.ts): 0 ok, 1 not found, 2 usage, 3 unreachable, 4 other store error, 5 local file.
import { parseCommandLine, type Invocation } from './args.js';
import { errorLine, exitCodeOf, ExitCode, HelpShown } from './cli-errors.js';
import type { CliContext } from './context.js';

type Command = (ctx: CliContext) => Promise<void>;
// Loaded on use: put/get bring the client and its addon, which the read-only commands need not load.
const RUN: Record<string, () => Promise<Command>> = {
  put: async () => (await import('./commands/data.js')).put,
  get: async () => (await import('./commands/data.js')).get,
  rm: async () => (await import('./commands/data.js')).rm,
  ls: async () => (await import('./commands/inspect.js')).ls,
  stat: async () => (await import('./commands/inspect.js')).stat,
  segments: async () => (await import('./commands/inspect.js')).segments,
  health: async () => (await import('./commands/health.js')).health,
  mount: async () => (await import('./commands/mount.js')).mount,
  unmount: async () => (await import('./commands/mount.js')).unmount,
  top: async () => (await import('./commands/top.js')).top,
  secret: async () => (await import('./commands/secret.js')).secret,
  task: async () => (await import('./commands/task.js')).task,
};

function exit(code: number): never {
  // STORE_CLI_VERBOSE=1: the peak memory of the run (tests check that a value is held once).
  if (process.env.STORE_CLI_VERBOSE === '1') process.stderr.write(`store: peak RSS ${process.resourceUsage().maxRSS * 1024} bytes\n`);
  process.exit(code);
}

async function main(): Promise<void> {
  // A closed pipe downstream (store ls | head) ends the tool quietly.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') exit(ExitCode.OK);
  });
  let inv: Invocation;
  try {
    inv = parseCommandLine(process.argv.slice(2));
  } catch (e) {
    if (e instanceof HelpShown) {
      process.stdout.write(e.text);
      exit(ExitCode.OK);
    }
    process.stderr.write(errorLine('', e) + '\n');
    exit(exitCodeOf(e));
  }
  const ctx: CliContext = { inv, env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };
  try {
    await (
      await RUN[inv.command]()
    )(ctx);
  } catch (e) {
    if (process.env.STORE_CLI_VERBOSE === '1' && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    process.stderr.write(errorLine(inv.command, e) + '\n');
    exit(exitCodeOf(e));
  }
  exit(ExitCode.OK);
}

void main();
