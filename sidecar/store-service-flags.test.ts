import { loopbackHostNotice, parseStoreServiceArgs, storeServiceFlags } from './store-service-flags.js';
import { FlagError } from '../common/flags.js';

const files: Record<string, string> = {
  'svc.json': JSON.stringify({
    local_hostname: '10.0.0.5',
    metadata_server: 'P2PHANDSHAKE',
    global_segment_size: 1073741824,
    local_buffer_size: 0,
    protocol: 'tcp',
    device_name: '',
    master_server_address: '10.0.0.1:50051',
  }),
  'bad-key.json': JSON.stringify({ global_segment_sise: 1 }),
  'bad-size.json': JSON.stringify({ global_segment_size: 'lots' }),
};
const read = (p: string) => {
  if (!(p in files)) throw new Error(`ENOENT: ${p}`);
  return files[p];
};

describe('store_service flags', () => {
  it('has the spec defaults', () => {
    const c = parseStoreServiceArgs([], read);
    expect(c).toMatchObject({ host: '0.0.0.0', port: 8080, rpcPort: 50052, maxSegmentSize: 64 * 1024 ** 3, shutdownGraceSeconds: 5, leaseTtlMs: 5000 });
    expect(c.client).toMatchObject({
      global_segment_size: 4 * 1024 ** 3,
      master_server_address: 'localhost:50051',
      metadata_server: 'http://localhost:8080/metadata',
      protocol: 'tcp',
    });
  });

  it('reads the JSON config and lets flags override it', () => {
    const c = parseStoreServiceArgs(['--config=svc.json', '--global_segment_size=256MB', '--port', '9000'], read);
    expect(c.port).toBe(9000);
    expect(c.client).toMatchObject({ local_hostname: '10.0.0.5', metadata_server: 'P2PHANDSHAKE', master_server_address: '10.0.0.1:50051', global_segment_size: 256 * 1024 ** 2 });
  });

  it('takes --master_server_address as the spec name of --master_server, refusing two different values', () => {
    expect(parseStoreServiceArgs(['--master_server_address=m:1'], read).client.master_server_address).toBe('m:1');
    expect(parseStoreServiceArgs(['--master_server=m:2'], read).client.master_server_address).toBe('m:2');
    expect(parseStoreServiceArgs(['--master_server=m:3', '--master_server_address=m:3'], read).client.master_server_address).toBe('m:3');
    expect(() => parseStoreServiceArgs(['--master_server=m:1', '--master_server_address=m:2'], read)).toThrow(/disagree/);
    expect(parseStoreServiceArgs(['--config=svc.json'], read).client.master_server_address).toBe('10.0.0.1:50051');
  });

  it('serves dummy clients: --threads only when given, the shared directory from --shm_dir, STORE_SHM_DIR or /dev/shm', () => {
    const d = parseStoreServiceArgs([], read, {});
    expect(d).toMatchObject({ threads: undefined, shmDir: '/dev/shm' });
    expect(d.client.local_buffer_size).toBe(64 * 1024 ** 2);
    expect(parseStoreServiceArgs(['--threads=3'], read, {}).threads).toBe(3);
    expect(parseStoreServiceArgs([], read, { STORE_SHM_DIR: '/store-shm' }).shmDir).toBe('/store-shm');
    expect(parseStoreServiceArgs(['--shm_dir=/x'], read, { STORE_SHM_DIR: '/store-shm' }).shmDir).toBe('/x');
    expect(parseStoreServiceArgs(['--shm_dir=none'], read, {}).shmDir).toBe('');
    expect(() => parseStoreServiceArgs(['--threads=0'], read, {})).toThrow(/--threads/);
  });

  it('names the bad flag or key', () => {
    const fails = (argv: string[], pattern: RegExp) => {
      expect(() => parseStoreServiceArgs(argv, read)).toThrow(FlagError);
      expect(() => parseStoreServiceArgs(argv, read)).toThrow(pattern);
    };
    fails(['--bogus=1'], /--bogus/);
    fails(['--global_segment_size=4 parsecs'], /global_segment_size/);
    fails(['--port=70000'], /--port/);
    fails(['--config=missing.json'], /--config=missing.json/);
    fails(['--config_path=svc.json'], /unknown flag --config_path \(did you mean --config\?\)/); // one config flag, not two
    expect(storeServiceFlags.usage()).not.toMatch(/config_path/);
    fails(['--config=bad-key.json'], /global_segment_sise/);
    fails(['--config=bad-size.json'], /global_segment_size/);
    fails(['--global_segment_size=0', '--local_buffer_size=0'], /hold nothing/);
    fails(['--protocol=udp'], /--protocol/);
    fails(['--max_segment_size=1000'], /--max_segment_size.*multiple of 4096/);
    fails(['--max_segment_size=0'], /--max_segment_size/);
    fails(['--shutdown_grace_seconds=-1'], /--shutdown_grace_seconds/);
    fails(['--default_kv_lease_ttl=soon'], /--default_kv_lease_ttl/);
  });

  it('takes the mount and shutdown settings', () => {
    const c = parseStoreServiceArgs(['--max_segment_size=16MB', '--shutdown_grace_seconds=0.5', '--default_kv_lease_ttl=2s'], read);
    expect(c).toMatchObject({ maxSegmentSize: 16 * 1024 ** 2, shutdownGraceSeconds: 0.5, leaseTtlMs: 2000 });
  });
});

describe('loopbackHostNotice', () => {
  it('warns when a loopback --local_hostname would be registered with a master on another host', () => {
    expect(loopbackHostNotice('localhost', '10.0.0.1:50051')).toMatch(/--local_hostname=localhost is a loopback name, but the master \(10\.0\.0\.1:50051\) is not on this host/);
    expect(loopbackHostNotice('127.0.0.1:12345', 'etcd://10.0.0.1:2379;10.0.0.2:2379')).toMatch(/loopback/);
    expect(loopbackHostNotice('[::1]:7000', 'master.store.svc:50051')).toMatch(/loopback/);
  });

  it('is quiet for a one-host setup or a real address', () => {
    expect(loopbackHostNotice('localhost', 'localhost:50051')).toBeUndefined();
    expect(loopbackHostNotice('127.0.0.1', '127.0.0.1:50051')).toBeUndefined();
    expect(loopbackHostNotice('10.0.0.5', '10.0.0.1:50051')).toBeUndefined();
    expect(loopbackHostNotice('node-3.example', 'localhost:50051')).toBeUndefined();
  });
});

describe('CXL memory (--enable_cxl, MC_CXL_DEV_PATH, MC_CXL_DEV_SIZE)', () => {
  it('is off by default, and the flags give the device and its size', () => {
    expect(parseStoreServiceArgs([], read, {}).cxl).toBeUndefined();
    expect(parseStoreServiceArgs(['--enable_cxl'], read, {}).cxl).toEqual({ path: '/dev/dax0.0', size: 8 * 1024 ** 3 });
    expect(parseStoreServiceArgs(['--enable_cxl', '--cxl_path=/dev/dax1.0', '--cxl_size=64MB'], read, {}).cxl).toEqual({ path: '/dev/dax1.0', size: 64 * 1024 ** 2 });
  });

  it('the environment the operator sets for a dax segment enables it and overrides the flags', () => {
    const env = { MC_CXL_DEV_PATH: '/dev/dax2.0', MC_CXL_DEV_SIZE: '1073741824' };
    // a dax pod holds no segment in process memory and no staging buffer: the device is its memory
    const c = parseStoreServiceArgs(['--global_segment_size=0', '--local_buffer_size=0', '--cxl_path=/dev/other'], read, env);
    expect(c.cxl).toEqual({ path: '/dev/dax2.0', size: 1024 ** 3 });
  });

  it('refuses a size that is not whole pages, and a store service that would hold nothing', () => {
    expect(() => parseStoreServiceArgs(['--enable_cxl', '--cxl_size=1000'], read, {})).toThrow(/multiple of 4096/);
    expect(() => parseStoreServiceArgs(['--enable_cxl'], read, { MC_CXL_DEV_SIZE: 'lots' })).toThrow(/MC_CXL_DEV_SIZE/);
    expect(() => parseStoreServiceArgs(['--global_segment_size=0', '--local_buffer_size=0'], read, {})).toThrow(FlagError);
  });
});

describe('the SSD tier (--offload_dir, --offload_size, STORE_OFFLOAD_DIR, STORE_OFFLOAD_SIZE)', () => {
  it('is off by default; the flags or the environment give the directory and size', () => {
    expect(parseStoreServiceArgs([], read, {}).offload).toBeUndefined();
    expect(parseStoreServiceArgs(['--offload_dir=/mnt/ssd', '--offload_size=1GB'], read, {}).offload).toEqual({ dir: '/mnt/ssd', size: 1024 ** 3 });
    expect(parseStoreServiceArgs([], read, { STORE_OFFLOAD_DIR: '/mnt/nvme', STORE_OFFLOAD_SIZE: '64MB' }).offload).toEqual({ dir: '/mnt/nvme', size: 64 * 1024 ** 2 });
    // a flag given wins over the environment
    expect(parseStoreServiceArgs(['--offload_size=8MB'], read, { STORE_OFFLOAD_DIR: '/d', STORE_OFFLOAD_SIZE: '64MB' }).offload).toEqual({ dir: '/d', size: 8 * 1024 ** 2 });
  });

  it('refuses a directory without a size, a size without a directory, and a size that is not whole pages', () => {
    expect(() => parseStoreServiceArgs(['--offload_dir=/mnt/ssd'], read, {})).toThrow(/--offload_size that is a positive multiple of 4096/);
    expect(() => parseStoreServiceArgs(['--offload_size=1GB'], read, {})).toThrow(/needs an --offload_dir/);
    expect(() => parseStoreServiceArgs(['--offload_dir=/mnt/ssd', '--offload_size=1000'], read, {})).toThrow(FlagError);
    expect(() => parseStoreServiceArgs(['--offload_dir=/mnt/ssd'], read, { STORE_OFFLOAD_SIZE: 'lots' })).toThrow(/STORE_OFFLOAD_SIZE/);
  });
});
