import { resolveSettings, setupBackoffMs, type ClientSetupConfig } from './setup-config.js';
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
    expect(s).toMatchObject({ host: 'node-1', enginePort: 13005, globalSegmentSize: 64 << 20, localBufferSize: 16 << 20, protocol: 'tcp', setupRetries: 20, localMemcpy: true });
    expect(resolveSettings(base, {}).enginePort).toBeUndefined();
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
