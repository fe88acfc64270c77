// Environment rules of the native layer: client port range, huge pages, arena, memcpy.
import { arenaConfig, clientPortRange, hugepageDefaults, isValidClientPort, memcpyLocalDefault, shmTransportDefault } from './env-config.js';

describe('clientPortRange', () => {
  test('defaults to 12300..14300', () => {
    expect(clientPortRange({})).toEqual({ min: 12300, max: 14300 });
  });
  test('takes valid values from MC_STORE_CLIENT_MIN_PORT / MAX_PORT', () => {
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '20000', MC_STORE_CLIENT_MAX_PORT: '20010' })).toEqual({ min: 20000, max: 20010 });
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '61000', MC_STORE_CLIENT_MAX_PORT: '65535' })).toEqual({ min: 61000, max: 65535 });
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '12353', MC_STORE_CLIENT_MAX_PORT: '12353' })).toEqual({ min: 12353, max: 12353 });
  });
  test('an invalid value falls back to its own default', () => {
    // below 1024, in the ephemeral gap 32768..60999, above 65535, not a number
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '80' })).toEqual({ min: 12300, max: 14300 });
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '13000', MC_STORE_CLIENT_MAX_PORT: '40000' })).toEqual({ min: 13000, max: 14300 });
    expect(clientPortRange({ MC_STORE_CLIENT_MAX_PORT: '70000' })).toEqual({ min: 12300, max: 14300 });
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: 'abc', MC_STORE_CLIENT_MAX_PORT: '12.5' })).toEqual({ min: 12300, max: 14300 });
  });
  test('max below min falls back to both defaults', () => {
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '14000', MC_STORE_CLIENT_MAX_PORT: '13000' })).toEqual({ min: 12300, max: 14300 });
    expect(clientPortRange({ MC_STORE_CLIENT_MIN_PORT: '20000' })).toEqual({ min: 12300, max: 14300 });
  });
  test('port validity bounds', () => {
    expect([1023, 1024, 32767, 32768, 60999, 61000, 65535, 65536].map(isValidClientPort)).toEqual([false, true, true, false, false, true, true, false]);
  });
});

describe('hugepageDefaults', () => {
  test('off unless MC_STORE_USE_HUGEPAGE is truthy; 2MB unless 1GB', () => {
    expect(hugepageDefaults({})).toEqual({ hugepage: false, hugepageSize: '2MB' });
    expect(hugepageDefaults({ MC_STORE_USE_HUGEPAGE: '1' })).toEqual({ hugepage: true, hugepageSize: '2MB' });
    expect(hugepageDefaults({ MC_STORE_USE_HUGEPAGE: '1', MC_STORE_HUGEPAGE_SIZE: '1GB' })).toEqual({ hugepage: true, hugepageSize: '1GB' });
    expect(hugepageDefaults({ MC_STORE_USE_HUGEPAGE: '0' }).hugepage).toBe(false);
  });
  test('an unsupported size is an error naming the variable', () => {
    expect(() => hugepageDefaults({ MC_STORE_HUGEPAGE_SIZE: '4MB' })).toThrow(/MC_STORE_HUGEPAGE_SIZE.*2MB or 1GB/);
  });
});

describe('arenaConfig', () => {
  test('enabled with the size from MC_MMAP_ARENA_POOL_SIZE', () => {
    expect(arenaConfig({ MC_MMAP_ARENA_POOL_SIZE: '8gb' })).toEqual({ enabled: true, poolSize: 8 * 1024 ** 3 });
    expect(arenaConfig({ MC_MMAP_ARENA_POOL_SIZE: '64mb' })).toEqual({ enabled: true, poolSize: 64 * 1024 ** 2 });
  });
  test('off by default, 8gb when enabled by flag without the variable', () => {
    expect(arenaConfig({})).toEqual({ enabled: false, poolSize: 0 });
    expect(arenaConfig({}, true)).toEqual({ enabled: true, poolSize: 8 * 1024 ** 3 });
  });
  test('MC_DISABLE_MMAP_ARENA wins for 1/true/yes/on', () => {
    for (const v of ['1', 'true', 'YES', 'on']) {
      expect(arenaConfig({ MC_MMAP_ARENA_POOL_SIZE: '8gb', MC_DISABLE_MMAP_ARENA: v }).enabled).toBe(false);
    }
    expect(arenaConfig({ MC_MMAP_ARENA_POOL_SIZE: '8gb', MC_DISABLE_MMAP_ARENA: '0' }).enabled).toBe(true);
  });
  test('a malformed size is an error', () => {
    expect(() => arenaConfig({ MC_MMAP_ARENA_POOL_SIZE: 'lots' })).toThrow(/invalid size/);
  });
});

test('MC_STORE_MEMCPY accepts 1/true', () => {
  expect(memcpyLocalDefault({})).toBe(false);
  expect(memcpyLocalDefault({ MC_STORE_MEMCPY: '1' })).toBe(true);
  expect(memcpyLocalDefault({ MC_STORE_MEMCPY: 'true' })).toBe(true);
  expect(memcpyLocalDefault({ MC_STORE_MEMCPY: '0' })).toBe(false);
});

test('MC_STORE_SHM_TRANSPORT is on unless 0/false/no/off', () => {
  expect(shmTransportDefault({})).toBe(true);
  expect(shmTransportDefault({ MC_STORE_SHM_TRANSPORT: '1' })).toBe(true);
  for (const v of ['0', 'false', 'No', 'off']) expect(shmTransportDefault({ MC_STORE_SHM_TRANSPORT: v })).toBe(false);
});
