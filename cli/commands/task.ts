// `store task copy KEY SEGMENT...`, `store task move KEY SOURCE TARGET`, `store task query ID`:
// the master's copy and move tasks (docs/tiers.md "Copy and move tasks") over its RPC port.
// copy and move print the new task's id; with --wait they, and query, wait (within --timeout)
// until the task finished and exit 4 when it failed. query prints the task's state.
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreError } from '../../client/errors.js';
import { taskInfoOf, type TaskInfo } from '../../client/task-info.js';
import type { MasterClient } from '../../client/master-client.js';
import { ErrorCode } from '../../common/error-code.js';
import { intArg } from '../args.js';
import { CliError, ExitCode, UsageError } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { resolveMaster } from '../endpoints.js';
import { keyArg } from '../key-arg.js';
import { connectMaster } from '../master-rpc.js';
import { jsonDoc, table } from '../output.js';
import { cliSecret } from '../secret-option.js';

/** How often --wait asks the master about the task (the CLI has no event to wait on). */
const WAIT_POLL_MS = 200;

export async function task(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const [verb, ...rest] = inv.args;
  const wait = inv.options.wait === true;
  const master = await connectMaster(await resolveMaster(inv.global, ctx.env), inv.global.timeoutMs, cliSecret(ctx));
  try {
    let id: number;
    if (verb === 'copy') {
      if (rest.length < 2) throw new UsageError('task copy KEY SEGMENT...: give the key and at least one target segment');
      const key = keyArg(rest[0]);
      const r = await master.createCopyTask({ key, targets: rest.slice(1) });
      if (r.status_code !== ErrorCode.OK) throw StoreError.fromCode(r.status_code, `copy ${JSON.stringify(key)} to ${rest.slice(1).join(', ')}`);
      id = Number(r.task_id);
    } else if (verb === 'move') {
      if (rest.length !== 3) throw new UsageError('task move KEY SOURCE TARGET: give the key, the source segment and the target segment');
      const key = keyArg(rest[0]);
      const r = await master.createMoveTask({ key, source: rest[1], target: rest[2] });
      if (r.status_code !== ErrorCode.OK) throw StoreError.fromCode(r.status_code, `move ${JSON.stringify(key)} from ${rest[1]} to ${rest[2]}`);
      id = Number(r.task_id);
    } else if (verb === 'query') {
      if (rest.length !== 1) throw new UsageError('task query ID: give one task id');
      id = intArg('ID', rest[0], 1, Number.MAX_SAFE_INTEGER);
    } else {
      throw new UsageError(`task: unknown action "${verb}" (one of copy, move, query)`);
    }
    if (verb !== 'query' && !wait) return write(ctx.stdout, inv.global.json ? jsonDoc({ task_id: id }) : `${id}\n`);
    const info = await queryUntil(master, id, wait, inv.global.timeoutMs);
    await write(ctx.stdout, inv.global.json ? jsonDoc(info) : describe(info));
    if (info.state === 'failed') throw new CliError(ExitCode.STORE_ERROR, `task ${id} failed: ${info.errorName}`);
  } finally {
    master.close();
  }
}

/** The task now, or (wait) once it finished; a task still running at the deadline is an error. */
async function queryUntil(master: MasterClient, id: number, wait: boolean, timeoutMs: number): Promise<TaskInfo> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const r = await master.queryTask({ task_id: id });
    if (r.status_code !== ErrorCode.OK) throw StoreError.fromCode(r.status_code, `query task ${id}`);
    const info = taskInfoOf(r.task!, Number(r.now_ms), Date.now());
    if (!wait || info.state === 'success' || info.state === 'failed') return info;
    if (performance.now() + WAIT_POLL_MS > deadline) throw new CliError(ExitCode.STORE_ERROR, `task ${id} still ${info.state} after ${timeoutMs} ms`);
    await sleep(WAIT_POLL_MS);
  }
}

function describe(t: TaskInfo): string {
  const rows = [
    ['id', String(t.id)],
    ['kind', t.kind],
    ['key', JSON.stringify(t.key)],
    ['state', t.state],
    ['error', t.errorCode === 0 ? '-' : t.errorName],
    ['attempts', String(t.attempts)],
    ...(t.kind === 'move' ? [['source', t.source]] : []),
    ['targets', t.targets.join(', ')],
    ['created', new Date(t.createdAt).toISOString()],
    ['updated', new Date(t.updatedAt).toISOString()],
  ];
  return table(['FIELD', 'VALUE'], rows);
}
