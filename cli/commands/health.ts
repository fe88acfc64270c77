// `store health`: is the master reachable and serving? The leader is resolved (HA forms), pinged
// over RPC (a Ping with a fresh client id changes nothing on the master) and its HTTP /health and
// /metrics/summary read (segments, clients, HA role). The report is printed in every case (also
// with --json); the exit code says the verdict: 0 healthy, 3 unreachable (no leader, RPC or HTTP
// does not answer), 4 reachable but not serving (a standby, an error status).
import { randomUUID } from 'node:crypto';
import { ErrorCode, errorCodeName } from '../../common/error-code.js';
import { CliError, ExitCode, exitCodeOf, type ExitCodeValue } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { masterAddress, masterHttp, resolveMaster } from '../endpoints.js';
import { getText } from '../http.js';
import { jsonDoc } from '../output.js';
import { cliSecret } from '../secret-option.js';
import { connectMaster } from '../master-rpc.js';

interface Check {
  ok: boolean;
  error?: string;
}

/** The "name: value" lines of /metrics/summary. */
export function summaryFields(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+): (.*)$/.exec(line);
    if (m) out[m[1]] = m[2];
  }
  return out;
}

/** A verdict that is not 0: the report was printed, the exit code carries it. */
export class Unhealthy extends CliError {
  override name = 'Unhealthy';
  constructor(code: ExitCodeValue, message: string) {
    super(code, message);
  }
}

export async function health(ctx: CliContext): Promise<void> {
  const g = ctx.inv.global;
  const address = await masterAddress(g, ctx.env);
  const report: {
    healthy: boolean;
    master: string;
    leader: string | null;
    rpc: Check & { view_version?: string };
    http: Check & { url?: string };
    segments: number | null;
    clients: number | null;
    ha_role: string | null;
  } = { healthy: false, master: address, leader: null, rpc: { ok: false }, http: { ok: false }, segments: null, clients: null, ha_role: null };
  let verdict: ExitCodeValue = ExitCode.OK;
  const fail = (code: ExitCodeValue): void => {
    if (verdict === ExitCode.OK || code === ExitCode.UNREACHABLE) verdict = code;
  };

  try {
    report.leader = await resolveMaster(g, ctx.env);
  } catch (e) {
    report.rpc.error = (e as Error).message;
    fail(exitCodeOf(e));
  }
  if (report.leader) {
    try {
      const m = await connectMaster(report.leader, g.timeoutMs, cliSecret(ctx));
      try {
        const r = await m.ping({ client_id: `store-cli-${randomUUID()}`, fence_acks: [], can_copy: false });
        report.rpc.view_version = String(r.view_version);
        if (r.status_code === ErrorCode.OK) report.rpc.ok = true;
        else {
          report.rpc.error = `Ping answered ${errorCodeName(r.status_code)}${r.status_code === ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS ? ' (not the leader)' : ''}`;
          fail(ExitCode.STORE_ERROR);
        }
      } finally {
        m.close();
      }
    } catch (e) {
      report.rpc.error = (e as Error).message;
      fail(ExitCode.UNREACHABLE);
    }
  }
  try {
    const base = await masterHttp(g, ctx.env, async () => {
      if (!report.leader) throw new CliError(ExitCode.UNREACHABLE, 'no leader to derive the HTTP address from');
      return report.leader;
    });
    report.http.url = base;
    const o = { timeoutMs: g.timeoutMs, peer: 'master' };
    const body = await getText(`${base}/health`, o);
    report.http.ok = body.trim() === 'OK';
    if (!report.http.ok) {
      report.http.error = `/health answered ${JSON.stringify(body.trim().slice(0, 80))}`;
      fail(ExitCode.STORE_ERROR);
    }
    const f = summaryFields(await getText(`${base}/metrics/summary`, o));
    report.segments = f.segments !== undefined ? Number(f.segments) : null;
    report.clients = f.clients !== undefined ? Number(f.clients) : null;
    report.ha_role = f.ha_role ?? null;
  } catch (e) {
    report.http.error = (e as Error).message;
    fail(exitCodeOf(e));
  }
  report.healthy = verdict === ExitCode.OK;

  if (g.json) await write(ctx.stdout, jsonDoc(report));
  else {
    const lines = [
      `master    ${address}${report.leader && report.leader !== address ? ` (leader ${report.leader})` : ''}`,
      `rpc       ${report.rpc.ok ? `ok (view_version ${report.rpc.view_version})` : `FAILED: ${report.rpc.error}`}`,
      `http      ${report.http.ok ? `ok (${report.http.url})` : `FAILED: ${report.http.error}`}`,
    ];
    if (report.ha_role) lines.push(`role      ${report.ha_role}`);
    if (report.segments !== null) lines.push(`segments  ${report.segments}   clients ${report.clients ?? '-'}`);
    lines.push(report.healthy ? 'healthy' : 'NOT healthy');
    await write(ctx.stdout, lines.join('\n') + '\n');
  }
  if (!report.healthy) throw new Unhealthy(verdict, `master ${address} is not healthy`);
}
