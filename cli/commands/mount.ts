// `store mount SIZE` and `store unmount ID...`: a store service's REST mount API (docs/client.md,
// "REST mount API") at --service (default STORE_SERVICE_HTTP_ADDRESS, else the injected sidecar's
// http://127.0.0.1:8080). unmount looks every id up in the service's /segments first and sends
// each to the endpoint that mounted it (/api/unmount or /api/unmount_shm): an unknown id is exit 1
// and nothing is unmounted.
import { intArg, sizeArg } from '../args.js';
import { NotFoundError, UsageError } from '../cli-errors.js';
import { write, type CliContext } from '../context.js';
import { serviceUrl } from '../endpoints.js';
import { cliSecret } from '../secret-option.js';
import { getText, readBody, request, statusError, type HttpOptions } from '../http.js';
import { formatSize, jsonDoc, table } from '../output.js';

interface ServiceSegment {
  name: string;
  id: string;
  size: number;
  state: string;
  origin: string;
  location?: string;
}

function opts(ctx: CliContext): HttpOptions {
  return { timeoutMs: ctx.inv.global.timeoutMs, peer: 'store service', secret: cliSecret(ctx) };
}

async function post(url: string, body: unknown, o: HttpOptions): Promise<Record<string, unknown>> {
  const res = await request(url, { ...o, method: 'POST', json: body });
  const text = await readBody(res, url, o);
  if (!res.ok) throw statusError(res.status, text, url, o);
  return JSON.parse(text) as Record<string, unknown>;
}

async function serviceSegments(base: string, o: HttpOptions): Promise<ServiceSegment[]> {
  return (JSON.parse(await getText(`${base}/segments`, o)) as { segments: ServiceSegment[] }).segments;
}

export async function mount(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const size = sizeArg('SIZE', inv.args[0], 1);
  const base = serviceUrl(inv.options.service as string | undefined, ctx.env);
  const o = opts(ctx);
  const shm = inv.options.shm as string | undefined;
  const location = inv.options.location as string | undefined;
  if (inv.options.offset !== undefined && shm === undefined) throw new UsageError('--offset applies to --shm mounts only');
  const body: Record<string, unknown> = { size, ...(location === undefined ? {} : { location }) };
  if (shm !== undefined) {
    body.name = shm;
    body.offset = inv.options.offset === undefined ? 0 : sizeArg('--offset', inv.options.offset as string, 0);
  }
  const r = await post(`${base}${shm === undefined ? '/api/mount' : '/api/mount_shm'}`, body, o);
  const ids = (r.segment_ids as string[]) ?? [];
  const byId = new Map((await serviceSegments(base, o)).map((s) => [s.id, s]));
  const segs = ids.map((id) => ({ id, name: byId.get(id)?.name ?? null, size: byId.get(id)?.size ?? null }));
  const allocated = typeof r.allocated_size === 'number' ? r.allocated_size : size;
  if (inv.global.json) return write(ctx.stdout, jsonDoc({ service: base, segment_ids: ids, allocated_size: allocated, segments: segs }));
  const head = `mounted ${formatSize(allocated)} as ${ids.length} segment(s) on ${base}\n`;
  return write(
    ctx.stdout,
    head +
      table(
        ['ID', 'NAME', 'SIZE'],
        segs.map((s) => [s.id, s.name ?? '-', s.size === null ? '-' : formatSize(s.size)]),
        [false, false, true],
      ),
  );
}

export async function unmount(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const base = serviceUrl(inv.options.service as string | undefined, ctx.env);
  const grace = inv.options.grace === undefined ? 0 : intArg('--grace', inv.options.grace as string, 0, 86400);
  const o = opts(ctx);
  const known = new Map((await serviceSegments(base, o)).map((s) => [s.id, s]));
  const groups = new Map<string, string[]>();
  for (const id of inv.args) {
    const seg = known.get(id);
    if (!seg) throw new NotFoundError(`no segment ${id} on the store service at ${base} (nothing was unmounted)`);
    if (seg.origin === 'global') throw new UsageError(`segment ${id} is the service's global segment, not a REST mount: it is unmounted only when the service stops`);
    const path = seg.origin === 'shm' ? '/api/unmount_shm' : '/api/unmount';
    groups.set(path, [...(groups.get(path) ?? []), id]);
  }
  for (const [path, ids] of groups) await post(`${base}${path}`, { segment_ids: ids, grace_period_seconds: grace }, o);
  if (inv.global.json) return write(ctx.stdout, jsonDoc({ service: base, unmounted: inv.args, grace_period_seconds: grace }));
  return write(ctx.stdout, `unmounted ${inv.args.length} segment(s)${grace ? ` (readable for ${grace} s more, closed to new objects)` : ''}\n`);
}
