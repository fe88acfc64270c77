// master_server_address forms accepted by leader discovery (the backends themselves are exercised
// against real etcd and Redis processes in e2e/ha.test.ts).
import { ErrorCode } from '../common/error-code.js';
import { parseMasterAddress, resolveMasterAddress, watchLeader } from './leader-discovery.js';

describe('parseMasterAddress', () => {
  it('keeps a plain host:port', () => {
    expect(parseMasterAddress('10.0.0.1:50051', {})).toEqual({ kind: 'direct', address: '10.0.0.1:50051' });
    expect(parseMasterAddress('[fd00::1]:50051', {})).toEqual({ kind: 'direct', address: '[fd00::1]:50051' });
  });

  it('reads etcd endpoints and the cluster id from the path, the env, or the default', () => {
    expect(parseMasterAddress('etcd://10.0.0.1:2379;10.0.0.2:2379', {})).toEqual({
      kind: 'etcd',
      endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
      clusterId: 'store_cluster',
    });
    expect(parseMasterAddress('etcd://e:2379', { MC_STORE_CLUSTER_ID: 'prod' })).toMatchObject({ clusterId: 'prod' });
    expect(parseMasterAddress('etcd://e:2379/blue', { MC_STORE_CLUSTER_ID: 'prod' })).toMatchObject({ clusterId: 'blue' });
    expect(parseMasterAddress('redis://r:6379/green', {})).toEqual({ kind: 'redis', host: 'r', port: 6379, clusterId: 'green' });
  });

  it('rejects malformed addresses with INVALID_PARAMS and the reason', () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return [(e as { code: number }).code, (e as Error).message];
      }
      throw new Error('no error');
    };
    expect(code(() => parseMasterAddress('nohost', {}))).toEqual([ErrorCode.INVALID_PARAMS, 'master_server_address "nohost": expected host:port']);
    expect(code(() => parseMasterAddress('zk://a:1', {}))[1]).toMatch(/unknown scheme/);
    expect(code(() => parseMasterAddress('etcd://', {}))[1]).toMatch(/no etcd endpoint/);
    expect(code(() => parseMasterAddress('redis://a:1;b:2', {}))[1]).toMatch(/one host:port/);
  });

  it('resolves and watches a plain address as itself', async () => {
    await expect(resolveMasterAddress('127.0.0.1:50051', {})).resolves.toBe('127.0.0.1:50051');
    const seen = await new Promise<string | undefined>((r) => watchLeader('127.0.0.1:50051', r, { env: {} }));
    expect(seen).toBe('127.0.0.1:50051');
  });
});
