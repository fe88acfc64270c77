// Whole-table answers of a real master (issue 10, defect 5): /get_all_keys over tens of MB of
// keys streams to a slow reader in bounded steps (the master's peak memory stays far below the
// size of the listing), RPCs are answered while the listing waits for the reader, and the
// listing is complete and correct at the end; RemoveAll over many objects runs in steps, so a
// ping sent after it is answered before it. Run `npm run build` first.
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { ErrorCode } from '../common/error-code.js';
import { MasterClient } from '../client/master-client.js';
import { memoryOf, startMaster, type MasterProcess } from './master-process.js';

const MiB = 1024 * 1024;
const CLIENT = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const KEYS = 40_000;
const KEY_CHARS = 2000;
/** The listing is about 80 MB; a master that built it whole would hold it at least twice (string and bytes). */
const LISTING_PEAK_BOUND = 48 * MiB;

const keyOf = (i: number): string => `${String(i).padStart(8, '0')}/${'k'.repeat(KEY_CHARS - 9)}`;

async function fill(c: MasterClient, from: number, to: number, batch = 1000): Promise<void> {
  for (let i = from; i < to; i += batch) {
    const keys = Array.from({ length: Math.min(batch, to - i) }, (_, j) => keyOf(i + j));
    const started = await c.batchPutStart({ requests: keys.map((key) => ({ key, value_length: 64, slice_lengths: [64], config: { replica_num: 1 } })) });
    expect(started.results.every((r) => r.status_code === ErrorCode.OK)).toBe(true);
    await c.batchPutEnd({ keys, replica_type: 0 });
  }
}

describe('store_master whole-table answers', () => {
  let m: MasterProcess;
  let c: MasterClient;

  beforeAll(async () => {
    // the first test's lease on keyOf(7) must outlive the whole file however slow the machine is
    m = await startMaster(['--default_kv_lease_ttl=600000']);
    c = await MasterClient.connect(m.rpc, { requestTimeoutMs: 60_000 });
    expect((await c.mountSegment({ buffer: 2 ** 40, size: 2 ** 34, segment_name: 'seg-1', client_id: CLIENT, te_endpoint: '127.0.0.1:1', protocol: 'tcp' })).status_code).toBe(
      ErrorCode.OK,
    );
    await fill(c, 0, KEYS);
  }, 120_000);

  afterAll(async () => {
    c.close();
    await m.stop();
  });

  it('streams /get_all_keys to a slow reader in bounded memory, answering pings meanwhile; the listing is complete', async () => {
    const base = memoryOf(m.pid, 'VmRSS');
    writeFileSync(`/proc/${m.pid}/clear_refs`, '5'); // VmHWM restarts from the current RSS
    const [host, port] = m.http.replace('http://', '').split(':');
    const socket = connect(Number(port), host, () => socket.write('GET /get_all_keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    const parts: Buffer[] = [];
    let ended = false;
    const firstData = new Promise<void>((r) => socket.once('data', () => r()));
    socket.on('data', (d: Buffer) => parts.push(d));
    const end = new Promise<void>((r) => socket.once('end', () => ((ended = true), r())));
    await firstData;
    socket.pause();
    // the reader sleeps; the master answers RPCs while the listing waits for it
    for (let i = 0; i < 20; i++) expect((await c.ping({ client_id: CLIENT })).status_code).toBe(ErrorCode.OK);
    expect((await c.getReplicaList({ key: keyOf(7) })).status_code).toBe(ErrorCode.OK);
    expect(ended).toBe(false);
    expect(memoryOf(m.pid, 'VmHWM') - base).toBeLessThanOrEqual(LISTING_PEAK_BOUND);
    socket.resume();
    await end;
    expect(memoryOf(m.pid, 'VmHWM') - base).toBeLessThanOrEqual(LISTING_PEAK_BOUND);
    const all = Buffer.concat(parts).toString('utf8');
    const head = all.slice(0, all.indexOf('\r\n\r\n'));
    expect(head).toMatch(/^HTTP\/1.1 200/);
    // de-chunk
    let rest = all.slice(head.length + 4);
    let body = '';
    for (;;) {
      const eol = rest.indexOf('\r\n');
      const n = parseInt(rest.slice(0, eol), 16);
      if (n === 0) break;
      body += rest.slice(eol + 2, eol + 2 + n);
      rest = rest.slice(eol + 2 + n + 2);
    }
    const lines = body.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(KEYS);
    expect(new Set(lines).size).toBe(KEYS);
    for (const l of lines) expect(l).toBe(keyOf(Number(l.slice(0, 8))));
  });

  it('pages /get_all_keys with ?limit=N&after=KEY', async () => {
    const r = await fetch(`${m.http}/get_all_keys?limit=3&after=${encodeURIComponent(keyOf(10))}`);
    expect(await r.text()).toBe([11, 12, 13].map((i) => keyOf(i) + '\n').join(''));
    expect(r.headers.get('x-has-more')).toBe('true');
  });

  it('RemoveAll walks the table in steps: a ping sent after it on the same connection is answered first', async () => {
    const order: string[] = [];
    const removal = c.removeAll({}).then((r) => {
      order.push('removeAll');
      return r;
    });
    const ping = c.ping({ client_id: CLIENT }).then(() => order.push('ping'));
    await Promise.all([removal, ping]);
    expect(order).toEqual(['ping', 'removeAll']);
    // all but the object the first test read (its lease is still running)
    expect((await removal).removed_count).toBe(KEYS - 1);
    expect(await (await fetch(`${m.http}/get_all_keys`)).text()).toBe(keyOf(7) + '\n');
  });
});
