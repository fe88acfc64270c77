// CXL memory end to end: a store service maps a DAX device (here a plain file standing in for
// one, as on any machine without CXL hardware) with --enable_cxl and mounts it as CXL memory; a
// master with --allocation_strategy=cxl places puts there without being told a segment, the bytes
// land in the device (read back from the file), and Get returns them. A path that cannot be
// mapped stops the store service with exit 2 naming --cxl_path. Run `npm run build` first.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readSync, closeSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { MemoryType } from '../proto/gen/store/MemoryType.js';
import { LocalCluster, type StoreServiceProcess } from '../sidecar/local-cluster.js';

const MiB = 1024 * 1024;
const CXL_BYTES = 16 * MiB;

let dir: string;
let device: string;
let cluster: LocalCluster;
let cxl: StoreServiceProcess;
let client: Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kvstore-cxl-'));
  device = join(dir, 'dax0.0');
  writeFileSync(device, '');
  truncateSync(device, CXL_BYTES); // sparse: the size a DAX device reports
  cluster = await LocalCluster.start({ storeServices: 1, segmentSize: '32MB', masterArgs: ['--enable_cxl=true', '--allocation_strategy=cxl'] });
  // a pure CXL store pod: no process memory as a segment, no staging buffer
  cxl = await cluster.addService(['--global_segment_size=0', '--local_buffer_size=0', '--enable_cxl=true', `--cxl_path=${device}`, `--cxl_size=${CXL_BYTES}`]);
  client = await Client.setup(cluster.clientConfig());
}, 60_000);

afterAll(async () => {
  await client?.close();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

interface SegmentDetail {
  segment_name: string;
  base_address: string;
  protocol: string;
  size_bytes: number;
}

async function segment(name: string): Promise<SegmentDetail> {
  const detail = JSON.parse(await cluster.admin('/get_segments_detail')) as { segments: SegmentDetail[] };
  const seg = detail.segments.find((s) => s.segment_name === name);
  if (seg === undefined) throw new Error(`segment ${name} is not mounted`);
  return seg;
}

function readDevice(offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  const fd = openSync(device, 'r');
  try {
    readSync(fd, out, 0, length, offset);
  } finally {
    closeSync(fd);
  }
  return out;
}

describe('a CXL segment backed by a file', () => {
  it('is mounted as CXL memory, and the cxl strategy puts objects there: the bytes are in the device', async () => {
    const seg = await segment(cxl.segment);
    expect(seg).toMatchObject({ protocol: 'cxl', size_bytes: CXL_BYTES });

    const value = randomBytes(MiB + 123);
    await client.put('cxl/one', value); // no preferred segment: the strategy finds the CXL memory
    const [replica] = (await client.queryByRegex('^cxl/one$')).get('cxl/one') ?? [];
    expect(replica.handles).toHaveLength(1);
    const handle = replica.handles[0];
    expect(handle.segment_name).toBe(cxl.segment);
    expect(handle.memory_type).toBe(MemoryType.CXL);

    const offset = Number(handle.buffer) - Number(BigInt(seg.base_address));
    expect(readDevice(offset, value.length).equals(value)).toBe(true);
    expect((await client.get('cxl/one')).equals(value)).toBe(true);
  });

  it('a device that cannot be mapped stops the store service with exit 2, naming --cxl_path', async () => {
    const missing = join(dir, 'no-such-dax');
    const svc = cluster.addService(['--global_segment_size=0', '--local_buffer_size=0', '--enable_cxl=true', `--cxl_path=${missing}`, '--cxl_size=4MB']);
    await expect(svc).rejects.toThrow(/exited \(2\)[\s\S]*--cxl_path: [\s\S]*no-such-dax/);
  });
});
