import { metadataServerProblem, resolveSettings, setupBackoffMs, type ClientSetupConfig } from './setup-config.js';
import { InvalidParamsError, UnavailableError } from './errors.js';
import { ErrorCode } from '../common/error-code.js';

const base: ClientSetupConfig = {
  local_hostname: '127.0.0.1',
  metadata_server: 'P2PHANDSHAKE',
  global_segment_size: '64MB',
  local_buffer_size: 16 << 20,
  master_server_address: '127.0.0.1:50051',
};

describe('client setup settings', () => {
  it('normalizes sizes with units, the engine port and defaults', () => {
    const s = resolveSettings({ ...base, local_hostname: 'node-1:13005' }, {});
    expect(s).toMatchObject({ host: 'node-1', enginePort: 13005, globalSegmentSize: 64 << 20, localBufferSize: 16 << 20, protocol: 'tcp', setupRetries: 20 });
    expect(resolveSettings(base, {}).enginePort).toBeUndefined();
  });

  it('uses local memcpy only when MC_STORE_MEMCPY is 1/true (spec default 0)', () => {
    expect(resolveSettings(base, {}).localMemcpy).toBe(false);
    expect(resolveSettings(base, { MC_STORE_MEMCPY: '' }).localMemcpy).toBe(false);
    expect(resolveSettings(base, { MC_STORE_MEMCPY: '0' }).localMemcpy).toBe(false);
    expect(resolveSettings(base, { MC_STORE_MEMCPY: 'false' }).localMemcpy).toBe(false);
    expect(resolveSettings(base, { MC_STORE_MEMCPY: '1' }).localMemcpy).toBe(true);
    expect(resolveSettings(base, { MC_STORE_MEMCPY: 'true' }).localMemcpy).toBe(true);
  });

  it('accepts the metadata_server forms and refuses any other with an InvalidParamsError naming it', () => {
    for (const ok of [
      'P2PHANDSHAKE',
      'http://10.0.0.1:8080/metadata',
      'https://meta.example:443/m',
      'etcd://a:2379',
      'etcd://a:2379;b:2379',
      'redis://r:6379',
      'rediss://r:6380',
    ]) {
      expect(metadataServerProblem(ok)).toBeUndefined();
      expect(resolveSettings({ ...base, metadata_server: ok }, {}).metadataServer).toBe(ok);
    }
    for (const bad of ['ftp://x', 'x', 'http://', 'etcd://', 'etcd://nohostport', 'redis://', 'p2phandshake']) {
      expect(metadataServerProblem(bad)).toMatch(/invalid metadata_server/);
      let err: unknown;
      try {
        resolveSettings({ ...base, metadata_server: bad }, {});
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidParamsError);
      expect((err as Error).message).toContain(`metadata_server "${bad}"`);
    }
  });

  it('honours the environment', () => {
    const s = resolveSettings(base, { MC_STORE_CLIENT_SETUP_RETRIES: '3', MC_STORE_MEMCPY: '0', MC_STORE_USE_HUGEPAGE: '1', MC_STORE_HUGEPAGE_SIZE: '1gb' });
    expect(s).toMatchObject({ setupRetries: 3, localMemcpy: false, hugepage: true, hugepageSize: '1GB' });
    expect(() => resolveSettings(base, { MC_STORE_CLIENT_SETUP_RETRIES: 'many' })).toThrow(/MC_STORE_CLIENT_SETUP_RETRIES/);
  });

  it('sizes the result arena from MC_STORE_RESULT_ARENA_SIZE (local_buffer_size by default, 0 = none) and rejects garbage', () => {
    expect(resolveSettings(base, {}).resultArenaBytes).toBe(16 << 20);
    expect(resolveSettings({ ...base, local_buffer_size: 0 }, {}).resultArenaBytes).toBe(0);
    expect(resolveSettings(base, { MC_STORE_RESULT_ARENA_SIZE: '64MB' }).resultArenaBytes).toBe(64 << 20);
    expect(resolveSettings(base, { MC_STORE_RESULT_ARENA_SIZE: '0' }).resultArenaBytes).toBe(0);
    expect(() => resolveSettings(base, { MC_STORE_RESULT_ARENA_SIZE: 'lots' })).toThrow(/MC_STORE_RESULT_ARENA_SIZE/);
  });

  it('allows pure client and pure server but not neither', () => {
    expect(resolveSettings({ ...base, global_segment_size: 0 }, {}).globalSegmentSize).toBe(0);
    expect(resolveSettings({ ...base, local_buffer_size: 0 }, {}).localBufferSize).toBe(0);
    expect(() => resolveSettings({ ...base, global_segment_size: 0, local_buffer_size: '0' }, {})).toThrow(InvalidParamsError);
  });

  it('rejects bad input with errors naming the parameter', () => {
    expect(() => resolveSettings({ ...base, local_hostname: '' }, {})).toThrow(/local_hostname is required/);
    expect(() => resolveSettings({ ...base, global_segment_size: '4 parsecs' }, {})).toThrow(/global_segment_size/);
    expect(() => resolveSettings({ ...base, local_buffer_size: -1 }, {})).toThrow(/local_buffer_size/);
    expect(() => resolveSettings({ ...base, master_server_address: '' }, {})).toThrow(/master_server_address/);
    expect(() => resolveSettings({ ...base, protocol: 'udp' }, {})).toThrow(/unknown protocol/);
  });

  it('says plainly that RDMA is not available, from the parameter or MC_RPC_PROTOCOL', () => {
    for (const s of [() => resolveSettings({ ...base, protocol: 'rdma' }, {}), () => resolveSettings(base, { MC_RPC_PROTOCOL: 'rdma' })]) {
      let err: unknown;
      try {
        s();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UnavailableError);
      expect((err as UnavailableError).code).toBe(ErrorCode.NOT_IMPLEMENTED);
      expect((err as Error).message).toMatch(/RDMA is not available in this build/i);
    }
  });

  it('backs off exponentially up to 2 s', () => {
    expect(setupBackoffMs(1, () => 0.5)).toBe(100);
    expect(setupBackoffMs(3, () => 0.5)).toBe(400);
    expect(setupBackoffMs(30, () => 0.5)).toBe(2000);
  });
});
