// Where the CLI finds the master, its HTTP port, the metadata service and a store service.
import { derivedMasterHttp, httpBase, masterAddress, masterHttp, metadataServer, serviceUrl } from './endpoints.js';
import { UsageError } from './cli-errors.js';
import type { GlobalOptions } from './args.js';

const g = (o: Partial<GlobalOptions> = {}): GlobalOptions => ({ timeoutMs: 1000, json: false, quiet: false, ...o });

describe('endpoints', () => {
  it('takes the master from the flag, else STORE_MASTER_ADDRESS (empty = unset); HA forms included', async () => {
    expect(await masterAddress(g({ master: 'a:1' }), { STORE_MASTER_ADDRESS: 'b:2' })).toBe('a:1');
    expect(await masterAddress(g(), { STORE_MASTER_ADDRESS: 'etcd://e1:2379;e2:2379/prod' })).toBe('etcd://e1:2379;e2:2379/prod');
    expect(await masterAddress(g({ master: 'redis://r:6379' }), {})).toBe('redis://r:6379');
    await expect(masterAddress(g(), { STORE_MASTER_ADDRESS: '' })).rejects.toThrow(/STORE_MASTER_ADDRESS/);
    await expect(masterAddress(g({ master: 'zk://x:1' }), {})).rejects.toThrow(UsageError);
    await expect(masterAddress(g({ master: 'nohostport' }), {})).rejects.toThrow(UsageError);
    await expect(masterAddress(g({ master: 'redis://a:1;b:2' }), {})).rejects.toThrow(/one host:port/);
  });

  it("derives the master's HTTP address from the leader's host and port 9003 unless told", async () => {
    expect(derivedMasterHttp('10.0.0.5:50051')).toBe('http://10.0.0.5:9003');
    expect(derivedMasterHttp('[fd00::5]:50051')).toBe('http://[fd00::5]:9003');
    expect(derivedMasterHttp('0.0.0.0:50051')).toBe('http://127.0.0.1:9003');
    expect(await masterHttp(g({ masterHttp: 'h:1/' }), {}, () => Promise.reject(new Error('not asked')))).toBe('http://h:1');
    expect(await masterHttp(g(), { STORE_MASTER_HTTP_ADDRESS: 'http://e:2' }, () => Promise.reject(new Error('not asked')))).toBe('http://e:2');
    expect(await masterHttp(g(), {}, () => Promise.resolve('10.1.1.1:6000'))).toBe('http://10.1.1.1:9003');
    expect(() => httpBase('--master-http', 'ftp://x:1')).toThrow(/expected http/);
  });

  it('metadata server: flag, STORE_METADATA_SERVER, else P2PHANDSHAKE; a bad form is a usage error', async () => {
    expect(await metadataServer(g(), {})).toBe('P2PHANDSHAKE');
    expect(await metadataServer(g(), { STORE_METADATA_SERVER: 'http://m:8080/metadata' })).toBe('http://m:8080/metadata');
    await expect(metadataServer(g({ metadata: 'bogus' }), {})).rejects.toThrow(UsageError);
  });

  it('store service: flag, STORE_SERVICE_HTTP_ADDRESS, else the sidecar default', () => {
    expect(serviceUrl(undefined, {})).toBe('http://127.0.0.1:8080');
    expect(serviceUrl(undefined, { STORE_SERVICE_HTTP_ADDRESS: '10.0.0.9:8081' })).toBe('http://10.0.0.9:8081');
    expect(serviceUrl('http://s:1', { STORE_SERVICE_HTTP_ADDRESS: 'x:2' })).toBe('http://s:1');
  });
});
