import { ErrorCode } from '../common/error-code.js';
import { Logger } from '../common/logger.js';
import { masterMethodByName, masterMethods } from '../common/master-proto.js';
import type { CoreStats } from './core-port.js';
import { MasterMetrics } from './master-metrics.js';
import { RescanHold } from './rescan-hold.js';
import { RpcDispatcher } from './rpc-dispatcher.js';
import { EMPTY_STATS } from './core/master-core-config.js';

const stats: CoreStats = EMPTY_STATS;
const idx = (name: string): number => masterMethodByName.get(name)!.index;

function setup(core: object): { d: RpcDispatcher; metrics: MasterMetrics; logs: string[]; seen: number[] } {
  const logs: string[] = [];
  const seen: number[] = [];
  let t = 100;
  const metrics = new MasterMetrics(masterMethods, () => stats);
  const d = new RpcDispatcher(core, masterMethods, () => (seen.push(t), t++), metrics, new Logger({ program: 't', stderr: (l) => logs.push(l) }));
  return { d, metrics, logs, seen };
}

describe('RpcDispatcher', () => {
  it('calls the core method named after the RPC with the clock reading as now', () => {
    const calls: Array<[object, number]> = [];
    const { d, seen } = setup({
      getReplicaList(req: object, now: number) {
        calls.push([req, now]);
        return { status_code: ErrorCode.OBJECT_NOT_FOUND, replica_list: [], lease_ttl_ms: 0 };
      },
    });
    const res = d.invoke(idx('GetReplicaList'), { key: 'k' }, 'channel');
    expect(res.status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(calls).toEqual([[{ key: 'k' }, seen[0]]]);
  });

  it('turns an exception into INTERNAL_ERROR, logs it and keeps serving', async () => {
    let fail = true;
    const { d, metrics, logs } = setup({
      ping() {
        if (fail) throw new Error('boom');
        return { status_code: 0, view_version: 1, need_remount: false };
      },
    });
    expect(d.invoke(idx('Ping'), { client_id: 'c' }, 'grpc').status_code).toBe(ErrorCode.INTERNAL_ERROR);
    expect(logs.join('')).toMatch(/Ping failed inside the master: Error: boom/);
    fail = false;
    expect(d.invoke(idx('Ping'), { client_id: 'c' }, 'grpc').status_code).toBe(ErrorCode.OK);
    const text = await metrics.metrics();
    expect(text).toMatch(/store_master_rpc_requests_total\{method="Ping",transport="grpc"\} 2/);
    expect(text).toMatch(/store_master_rpc_errors_total\{method="Ping",code="INTERNAL_ERROR"\} 1/);
  });

  it('answers NOT_IMPLEMENTED for an RPC the core lacks, and fills a missing status_code with OK', () => {
    const { d, logs } = setup({ remove: () => ({}) });
    expect(d.invoke(idx('RemoveAll'), {}, 'channel').status_code).toBe(ErrorCode.NOT_IMPLEMENTED);
    expect(logs.join('')).toMatch(/MasterCore has no method removeAll/);
    expect(d.invoke(idx('Remove'), { key: 'k' }, 'channel').status_code).toBe(ErrorCode.OK);
  });

  it('answers a disabled RPC NOT_IMPLEMENTED without calling the core (--enable_remove_all=false)', async () => {
    const called: string[] = [];
    const core = {
      removeAll: () => (called.push('removeAll'), { status_code: 0, removed_count: 1 }),
      // eslint-disable-next-line require-yield -- a walk that finishes in its first step
      *removeAllSteps() {
        called.push('removeAllSteps');
        return { status_code: 0, removed_count: 1 };
      },
      remove: () => (called.push('remove'), { status_code: 0 }),
    };
    const metrics = new MasterMetrics(masterMethods, () => stats);
    const d = new RpcDispatcher(core, masterMethods, () => 0, metrics, new Logger({ program: 't', stderr: () => {} }), new Set(['RemoveAll']));
    expect(await d.serve(idx('RemoveAll'), {}, 'grpc')).toEqual({ status_code: ErrorCode.NOT_IMPLEMENTED });
    expect(d.invoke(idx('RemoveAll'), {}, 'channel').status_code).toBe(ErrorCode.NOT_IMPLEMENTED);
    expect(d.invoke(idx('Remove'), { key: 'k' }, 'channel').status_code).toBe(ErrorCode.OK);
    expect(called).toEqual(['remove']);
  });

  it('counts an undecodable request as INVALID_PARAMS', async () => {
    const { d, metrics } = setup({});
    expect(d.invalid(idx('PutStart'), 'channel', 'index out of range').status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(await metrics.metrics()).toMatch(/store_master_rpc_errors_total\{method="PutStart",code="INVALID_PARAMS"\} 1/);
  });

  it('serves an RPC that has <call>Steps one step per turn of the event loop, other calls answered in between', async () => {
    const log: string[] = [];
    const { d, metrics } = setup({
      removeAll: () => ({ status_code: 0, removed_count: -1 }),
      *removeAllSteps(_req: object, now: number) {
        log.push(`step 1 at ${now}`);
        now = yield;
        log.push(`step 2 at ${now}`);
        yield;
        log.push('step 3');
        return { status_code: 0, removed_count: 3 };
      },
      ping: () => (log.push('ping'), { status_code: 0, view_version: 1, need_remount: false }),
    });
    const pending = d.serve(idx('RemoveAll'), {}, 'channel');
    expect(pending).toBeInstanceOf(Promise);
    expect(log).toEqual(['step 1 at 100']);
    expect(d.serve(idx('Ping'), { client_id: 'c' }, 'channel')).toMatchObject({ status_code: 0 });
    expect(await pending).toEqual({ status_code: 0, removed_count: 3 });
    expect(log).toEqual(['step 1 at 100', 'ping', 'step 2 at 103', 'step 3']); // the clock ticks once per reading
    expect(await metrics.metrics()).toMatch(/store_master_rpc_requests_total\{method="RemoveAll",transport="channel"\} 1/);
    // invoke() still runs the plain method
    expect(d.invoke(idx('RemoveAll'), {}, 'grpc')).toEqual({ status_code: 0, removed_count: -1 });
  });

  it('turns an exception in a step into INTERNAL_ERROR', async () => {
    const { d, logs } = setup({
      // eslint-disable-next-line require-yield
      *getReplicaListByRegexSteps() {
        throw new Error('walk broke');
      },
    });
    expect(await d.serve(idx('GetReplicaListByRegex'), { key_regex: 'x' }, 'grpc')).toEqual({ status_code: ErrorCode.INTERNAL_ERROR });
    expect(logs.join('')).toMatch(/GetReplicaListByRegex failed inside the master: Error: walk broke/);
  });
});

describe('RpcDispatcher with a rescan hold (master/rescan-hold.ts)', () => {
  it('holds a reply of UNAVAILABLE_IN_CURRENT_STATUS while the hold says so, then asks the core again: one call counted, the second answer sent', async () => {
    let scanned = false;
    let release!: () => void;
    const scan = new Promise<void>((r) => (release = r));
    const hold = new RescanHold(60_000);
    hold.begin(scan.then(() => (scanned = true)));
    const asked: boolean[] = [];
    const metrics = new MasterMetrics(masterMethods, () => stats);
    const core = {
      getReplicaList() {
        asked.push(scanned);
        return scanned
          ? { status_code: ErrorCode.OK, replica_list: [], lease_ttl_ms: 5, slice_checksums: [], version: 0 }
          : { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS };
      },
      ping: () => ({ status_code: ErrorCode.OK }),
    };
    let t = 0;
    const d = new RpcDispatcher(core, masterMethods, () => t++, metrics, new Logger({ program: 't', stderr: () => {} }), new Set(), undefined, hold);
    const held = d.serve(idx('GetReplicaList'), { key: 'k' }, 'channel');
    expect(held).toBeInstanceOf(Promise);
    expect(hold.held).toBe(1);
    expect(d.serve(idx('Ping'), { client_id: 'c' }, 'channel')).toEqual({ status_code: ErrorCode.OK }); // others go on
    release();
    expect((await held).status_code).toBe(ErrorCode.OK);
    expect(asked).toEqual([false, true]);
    expect(hold.held).toBe(0);
    const text = await metrics.metrics();
    expect(text).toMatch(/store_master_rpc_requests_total\{method="GetReplicaList",transport="channel"\} 1/);
    expect(text).not.toMatch(/store_master_rpc_errors_total\{method="GetReplicaList"/);
    // no rescan running: UNAVAILABLE goes out at once
    const later = { getReplicaList: () => ({ status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS }) };
    const d2 = new RpcDispatcher(later, masterMethods, () => t++, metrics, new Logger({ program: 't', stderr: () => {} }), new Set(), undefined, hold);
    expect(d2.serve(idx('GetReplicaList'), { key: 'k' }, 'channel')).toEqual({ status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS });
  });

  it('holds a call at most holdMs: then the core is asked again (and may still say UNAVAILABLE_IN_CURRENT_STATUS)', async () => {
    const hold = new RescanHold(20);
    hold.begin(new Promise(() => {})); // a scan that never ends
    const d = new RpcDispatcher(
      { getReplicaList: () => ({ status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS }) },
      masterMethods,
      () => 0,
      new MasterMetrics(masterMethods, () => stats),
      new Logger({ program: 't', stderr: () => {} }),
      new Set(),
      undefined,
      hold,
    );
    expect(await d.serve(idx('GetReplicaList'), { key: 'k' }, 'grpc')).toEqual({ status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS });
    expect(hold.held).toBe(0);
  });
});
