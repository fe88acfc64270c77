// A tiny command language that drives MasterCore for scenario scripts (testdata/*.txt, replayed
// by core-script.test.ts against their golden output, in the manner of raft's datadriven tests).
// One command per line, `name key=value ...`; the runner owns the clock (starts at 0, `tick`
// advances it) and prints each command's outcome in a short, stable text form. After every
// command the core's derived indexes are cross-checked and any inconsistency is printed.
//
// A script file is a sequence of cases, each: optional `#` comment lines, one command line, a
// `----` line, the expected output, and a blank line.
import { errorCodeName } from '../../common/error-code.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import type { MasterCoreConfig } from './master-core-config.js';
import { defaultMasterCoreConfig } from './master-core-config.js';
import { MasterCore } from './master-core.js';
import { SeededRng } from './rng.js';

export interface ScriptCase {
  comments: string[];
  command: string;
  expected: string;
}

type Args = Map<string, string>;

const MEMORY = 0;

export function parseScript(text: string): ScriptCase[] {
  const cases: ScriptCase[] = [];
  const lines = text.split('\n');
  let i = 0;
  while (i < lines.length) {
    const comments: string[] = [];
    while (i < lines.length && (lines[i].startsWith('#') || lines[i].trim() === '')) {
      if (lines[i].startsWith('#')) comments.push(lines[i]);
      i++;
    }
    if (i >= lines.length) break;
    const command = lines[i++];
    if (lines[i] !== '----') throw new Error(`line ${i + 1}: expected ---- after "${command}"`);
    i++;
    const out: string[] = [];
    while (i < lines.length && lines[i] !== '') out.push(lines[i++]);
    cases.push({ comments, command, expected: out.join('\n') });
  }
  return cases;
}

export function formatScript(cases: readonly ScriptCase[]): string {
  return cases.map((c) => [...c.comments, c.command, '----', c.expected].join('\n')).join('\n\n') + '\n';
}

/** Runs a whole script against a fresh core; returns the cases with the actual output. */
export function runScript(cases: readonly ScriptCase[]): ScriptCase[] {
  const runner = new ScriptRunner();
  return cases.map((c) => ({ ...c, expected: runner.run(c.command) }));
}

function parseArgs(words: string[]): Args {
  const args: Args = new Map();
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new Error(`argument "${w}" is not key=value`);
    args.set(w.slice(0, eq), w.slice(eq + 1));
  }
  return args;
}

function req(args: Args, name: string): string {
  const v = args.get(name);
  if (v === undefined) throw new Error(`missing argument ${name}=`);
  return v;
}

const num = (args: Args, name: string, dflt?: number): number => {
  const v = args.get(name);
  if (v === undefined && dflt !== undefined) return dflt;
  const n = Number(req(args, name));
  if (!Number.isFinite(n)) throw new Error(`${name}= must be a number`);
  return n;
};

const status = (code: number): string => (code === 0 ? 'ok' : errorCodeName(code));

export class ScriptRunner {
  private core: MasterCore = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(1));
  private now = 0;
  private readonly bases = new Map<string, number>();
  /** Who mounted each segment: `unmount` names the owner unless the script says `client=`. */
  private readonly owners = new Map<string, string>();

  run(line: string): string {
    const [name, ...words] = line.trim().split(/\s+/);
    const args = parseArgs(words);
    const out = this.dispatch(name, args);
    const problems = this.core.checkIndexes();
    return [out, ...problems.map((p) => `INDEX PROBLEM: ${p}`)].join('\n');
  }

  private dispatch(name: string, a: Args): string {
    const core = this.core;
    const now = this.now;
    const key = (): string => req(a, 'key');
    switch (name) {
      case 'config': {
        // Restarts with a fresh core: `config evictionRatio=0.5 ...` (numbers and booleans).
        const overrides: Record<string, number | boolean | string> = {};
        for (const [k, v] of a) overrides[k] = v === 'true' ? true : v === 'false' ? false : Number.isNaN(Number(v)) ? v : Number(v);
        this.core = new MasterCore({ ...defaultMasterCoreConfig, ...(overrides as Partial<MasterCoreConfig>) }, new SeededRng(1));
        this.now = 0;
        this.bases.clear();
        this.owners.clear();
        return 'ok';
      }
      case 'tick':
        this.now += num(a, 'ms');
        return `now=${this.now}`;
      case 'mount': {
        const seg = req(a, 'seg');
        const base = 0x1000_0000 * (this.bases.size + 1);
        const r = core.mountSegment(
          { buffer: base, size: num(a, 'size'), segment_name: seg, client_id: a.get('client') ?? 'c1', segment_id: '', te_endpoint: '', protocol: '', incarnation: 0 },
          now,
        );
        if (r.status_code === 0) {
          this.bases.set(seg, base);
          this.owners.set(seg, a.get('client') ?? 'c1');
        }
        return status(r.status_code);
      }
      case 'unmount':
        return status(
          core.unmountSegment({ segment_name: req(a, 'seg'), client_id: a.get('client') ?? this.owners.get(req(a, 'seg')) ?? '', grace_period_seconds: num(a, 'grace', 0) }, now)
            .status_code,
        );
      case 'ping': {
        const r = core.ping({ client_id: req(a, 'client'), fence_acks: [], can_copy: false }, now);
        return r.status_code === 0 && r.need_remount ? 'ok need_remount' : status(r.status_code);
      }
      case 'put': {
        const s = core.putStart(this.putReq(a), now);
        if (s.status_code !== 0) return status(s.status_code);
        return `${status(core.putEnd({ key: key(), replica_type: MEMORY, slice_checksums: [] }, now).status_code)} ${this.replicas(s.replica_list)}`;
      }
      case 'put-start': {
        const r = core.putStart(this.putReq(a), now);
        return r.status_code === 0 ? `ok ${this.replicas(r.replica_list)}` : status(r.status_code);
      }
      case 'put-end':
        return status(core.putEnd({ key: key(), replica_type: MEMORY, slice_checksums: [] }, now).status_code);
      case 'put-revoke':
        return status(core.putRevoke({ key: key(), replica_type: MEMORY, failed_segments: [] }, now).status_code);
      case 'upsert-start': {
        const r = core.upsertStart(this.putReq(a), now);
        return r.status_code === 0 ? `ok${r.reused ? ' reused' : ''} ${this.replicas(r.replica_list)}` : status(r.status_code);
      }
      case 'upsert-end':
        return status(core.upsertEnd({ key: key(), replica_type: MEMORY, slice_checksums: [] }, now).status_code);
      case 'upsert-revoke':
        return status(core.upsertRevoke({ key: key(), replica_type: MEMORY, failed_segments: [] }, now).status_code);
      case 'get': {
        const r = core.getReplicaList({ key: key() }, now);
        return r.status_code === 0 ? `ok lease=${r.lease_ttl_ms}ms ${this.replicas(r.replica_list)}` : status(r.status_code);
      }
      case 'exist': {
        const r = core.existKey({ key: key() }, now);
        return r.status_code === 0 ? `ok exists=${r.exists}` : status(r.status_code);
      }
      case 'remove':
        return status(core.remove({ key: key(), force: a.get('force') === 'true' }, now).status_code);
      case 'remove-all': {
        const r = core.removeAll({}, now);
        return `${status(r.status_code)} removed=${r.removed_count}`;
      }
      case 'clear': {
        const r = core.batchReplicaClear({ client_id: req(a, 'client'), segment_name: a.get('seg') ?? '', object_keys: req(a, 'keys').split(',') }, now);
        return `${status(r.status_code)} cleared=[${r.cleared_keys.join(' ')}]`;
      }
      case 'sweep': {
        const r = core.sweep(now);
        const parts = [`evicted=${r.evictedObjects}`, `released=${r.releasedZombies}`];
        if (r.droppedClients.length > 0) parts.push(`dropped=[${r.droppedClients.join(' ')}]`);
        if (r.unmountedSegments.length > 0) parts.push(`unmounted=[${r.unmountedSegments.join(' ')}]`);
        return parts.join(' ');
      }
      case 'objects': {
        const keys = [...core.allKeys()].sort();
        if (keys.length === 0) return '(none)';
        return keys.map((k) => `${k}: ${this.replicas(core.queryKey(k)!)}`).join('\n');
      }
      case 'order': {
        const o = core.evictionOrder();
        return `lru: ${o.plain.join(' ') || '-'}\nsoft-pinned lru: ${o.softPinned.join(' ') || '-'}`;
      }
      case 'segments': {
        const lines = core.segmentsDetail().map((s) => `${s.segment_name} ${s.status} used=${s.allocator_used_bytes}/${s.allocator_capacity_bytes}`);
        return lines.length > 0 ? lines.join('\n') : '(none)';
      }
      case 'stats': {
        const s = core.stats(now);
        return `objects=${s.objects} leases=${s.activeLeases} soft=${s.softPinned} hard=${s.hardPinned} evictions=${s.evictionsTotal} used=${s.usedBytes}/${s.capacityBytes}`;
      }
      default:
        throw new Error(`unknown command ${name}`);
    }
  }

  private putReq(a: Args) {
    const slice_lengths = req(a, 'size').split(',').map(Number);
    const pin = a.get('pin') ?? 'none';
    return {
      key: req(a, 'key'),
      value_length: slice_lengths.reduce((x, y) => x + y, 0),
      slice_lengths,
      config: { replica_num: num(a, 'replicas', 1), with_soft_pin: pin === 'soft', with_hard_pin: pin === 'hard', preferred_segment: a.get('seg') ?? '' },
    };
  }

  /** `seg[offset+size,...]` per replica, offsets relative to the segment's base. */
  private replicas(list: readonly ReplicaInfo__Output[]): string {
    if (list.length === 0) return '(no replicas)';
    return list
      .map((r) => {
        const seg = r.handles[0].segment_name;
        const spans = r.handles.map((h) => `${h.segment_name === seg ? '' : `${h.segment_name}:`}${Number(h.buffer) - (this.bases.get(h.segment_name) ?? 0)}+${h.size}`);
        return `${seg}[${spans.join(',')}]`;
      })
      .join(' ');
  }
}
