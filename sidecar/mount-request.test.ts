// Validation of the REST mount API's bodies and the split of regions into segments.
import { MAX_SEGMENTS_PER_REQUEST, parseMountMemory, parseMountShm, parseUnmount, RestError, splitRegion } from './mount-request.js';

const ID = '0b9d6d1e-5c1f-4a53-9c53-0d6f0c1d2e3f';

function refused(f: () => unknown, pattern: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(RestError);
  expect((err as RestError).status).toBe(400);
  expect((err as RestError).message).toMatch(pattern);
}

describe('mount_shm body', () => {
  it('takes name (leading "/" or not), size, offset, protocol, location', () => {
    expect(parseMountShm({ name: '/pool', size: 4096 }, 'tcp')).toEqual({ name: 'pool', size: 4096, offset: 0, protocol: 'tcp', location: '' });
    expect(parseMountShm({ name: 'pool', size: 10, offset: 8192, protocol: 'tcp', location: 'numa0' }, 'tcp')).toEqual({
      name: 'pool',
      size: 10,
      offset: 8192,
      protocol: 'tcp',
      location: 'numa0',
    });
  });

  it('refuses bad names, sizes, offsets, protocols and unknown fields', () => {
    refused(() => parseMountShm({ size: 1 }, 'tcp'), /name is required/);
    refused(() => parseMountShm({ name: '/', size: 1 }, 'tcp'), /names no object/);
    refused(() => parseMountShm({ name: '/a/b', size: 1 }, 'tcp'), /path separator/);
    refused(() => parseMountShm({ name: '../x', size: 1 }, 'tcp'), /path separator/);
    refused(() => parseMountShm({ name: 'a\\b', size: 1 }, 'tcp'), /path separator/);
    refused(() => parseMountShm({ name: '..', size: 1 }, 'tcp'), /not a valid/);
    refused(() => parseMountShm({ name: 'x'.repeat(256), size: 1 }, 'tcp'), /longer than 255/);
    refused(() => parseMountShm({ name: 'p' }, 'tcp'), /size is required/);
    refused(() => parseMountShm({ name: 'p', size: 0 }, 'tcp'), /positive integer/);
    refused(() => parseMountShm({ name: 'p', size: -5 }, 'tcp'), /positive integer/);
    refused(() => parseMountShm({ name: 'p', size: 1.5 }, 'tcp'), /positive integer/);
    refused(() => parseMountShm({ name: 'p', size: '4096' }, 'tcp'), /positive integer/);
    refused(() => parseMountShm({ name: 'p', size: 1, offset: -4096 }, 'tcp'), /offset must be a non-negative integer/);
    refused(() => parseMountShm({ name: 'p', size: 1, offset: 100 }, 'tcp'), /not a multiple of the 4096-byte page/);
    refused(() => parseMountShm({ name: 'p', size: 1, protocol: 'rdma' }, 'tcp'), /RDMA is not available/);
    refused(() => parseMountShm({ name: 'p', size: 1, protocol: 'udp' }, 'tcp'), /protocol must be "tcp"/);
    refused(() => parseMountShm({ name: 'p', size: 1, location: 7 }, 'tcp'), /location must be a string/);
    refused(() => parseMountShm({ name: 'p', size: 1, sise: 2 }, 'tcp'), /unknown field\(s\) "sise"/);
    refused(() => parseMountShm([{ name: 'p', size: 1 }], 'tcp'), /must be a JSON object/);
    refused(() => parseMountShm(null, 'tcp'), /must be a JSON object/);
  });
});

describe('mount body', () => {
  it('takes size, protocol, location', () => {
    expect(parseMountMemory({ size: 123 }, 'tcp')).toEqual({ size: 123, protocol: 'tcp', location: '' });
    expect(parseMountMemory({ size: 1, protocol: '', location: 'x' }, 'tcp')).toEqual({ size: 1, protocol: 'tcp', location: 'x' });
  });

  it('refuses a missing, negative or non-integer size and unknown fields', () => {
    refused(() => parseMountMemory({}, 'tcp'), /size is required/);
    refused(() => parseMountMemory({ size: -1 }, 'tcp'), /positive integer/);
    refused(() => parseMountMemory({ size: 2 ** 60 }, 'tcp'), /positive integer/);
    refused(() => parseMountMemory({ size: 1, name: 'x' }, 'tcp'), /unknown field\(s\) "name"/);
  });
});

describe('unmount body', () => {
  it('takes an array or one string, lower-cases and de-duplicates ids, grace default 0', () => {
    expect(parseUnmount({ segment_ids: ID }, 'unmount')).toEqual({ segmentIds: [ID], graceSeconds: 0 });
    expect(parseUnmount({ segment_ids: [ID.toUpperCase(), ID], grace_period_seconds: 2.5 }, 'unmount')).toEqual({ segmentIds: [ID], graceSeconds: 2.5 });
  });

  it('refuses missing or malformed ids and bad grace periods', () => {
    refused(() => parseUnmount({}, 'unmount'), /segment_ids is required/);
    refused(() => parseUnmount({ segment_ids: [] }, 'unmount'), /non-empty array/);
    refused(() => parseUnmount({ segment_ids: [ID, 7] }, 'unmount'), /7 is not a UUID/);
    refused(() => parseUnmount({ segment_ids: 'seg-1' }, 'unmount'), /"seg-1" is not a UUID/);
    refused(() => parseUnmount({ segment_ids: Array(MAX_SEGMENTS_PER_REQUEST + 1).fill(ID) }, 'unmount'), /at most 1024/);
    refused(() => parseUnmount({ segment_ids: ID, grace_period_seconds: -1 }, 'unmount'), /grace_period_seconds must be/);
    refused(() => parseUnmount({ segment_ids: ID, grace_period_seconds: '5' }, 'unmount'), /grace_period_seconds must be/);
    refused(() => parseUnmount({ segment_ids: ID, grace_period_seconds: 1e9 }, 'unmount'), /grace_period_seconds must be/);
    refused(() => parseUnmount({ segment_ids: ID, force: true }, 'unmount_shm'), /unmount_shm: unknown field/);
  });
});

describe('splitRegion', () => {
  it('cuts full pieces of the maximum, then the rest', () => {
    expect(splitRegion(10, 4, 'mount')).toEqual([4, 4, 2]);
    expect(splitRegion(8, 4, 'mount')).toEqual([4, 4]);
    expect(splitRegion(3, 4, 'mount')).toEqual([3]);
  });

  it('refuses more segments than one request may create', () => {
    refused(() => splitRegion(4096 * 1025, 4096, 'mount'), /1025 segments/);
  });
});
