// The work queue: deduplicated keys, never two passes of one key at once, a change during a pass
// runs it again, failures retry after the backoff delay, terminal errors and successes do not.
import { jest } from '@jest/globals';
import { Backoff } from './backoff.js';
import { Controller } from './controller.js';
import { TerminalError, type Result } from './context.js';

/** A reconcile function whose passes the test completes by hand. */
function manual() {
  const calls: { key: string; finish: (r?: Result | Error) => void }[] = [];
  let active = 0;
  let maxActive = 0;
  const fn = (ns: string, name: string) =>
    new Promise<Result>((resolve, reject) => {
      active++;
      maxActive = Math.max(maxActive, active);
      calls.push({
        key: `${ns}/${name}`,
        finish: (r) => {
          active--;
          if (r instanceof Error) reject(r);
          else resolve(r ?? {});
        },
      });
    });
  return { fn, calls, maxActive: () => maxActive };
}
const flush = () => new Promise<void>((r) => setImmediate(r));

describe('Controller', () => {
  afterEach(() => jest.useRealTimers());

  it('reconciles a key once however often it was enqueued while waiting', async () => {
    const m = manual();
    const c = new Controller({ StoreCluster: m.fn }, () => {});
    c.enqueue('StoreCluster', 'ml', 'kv');
    c.enqueue('StoreCluster', 'ml', 'kv');
    c.enqueue('StoreCluster', 'ml', 'kv');
    c.start();
    await flush();
    expect(m.calls.map((x) => x.key)).toEqual(['ml/kv']);
    m.calls[0].finish();
    await flush();
    expect(m.calls).toHaveLength(1);
    c.stop();
  });

  it('runs a key changed during its pass again afterwards, never concurrently', async () => {
    const m = manual();
    const c = new Controller({ StoreCluster: m.fn }, () => {});
    c.start();
    c.enqueue('StoreCluster', 'ml', 'kv');
    await flush();
    c.enqueue('StoreCluster', 'ml', 'kv');
    await flush();
    expect(m.calls).toHaveLength(1);
    m.calls[0].finish();
    await flush();
    expect(m.calls).toHaveLength(2);
    m.calls[1].finish();
    await flush();
    expect(m.maxActive()).toBe(1);
    c.stop();
  });

  it('retries a failed pass after the backoff delay, but not a terminal error', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
    const m = manual();
    const logs: string[] = [];
    const c = new Controller({ StoreCluster: m.fn }, (l) => logs.push(l), new Backoff({ baseMs: 1000, maxMs: 8000, jitter: 0 }, () => 0));
    c.start();
    c.enqueue('StoreCluster', 'ml', 'kv');
    await flush();
    m.calls[0].finish(new Error('API down'));
    await flush();
    expect(logs).toEqual(['StoreCluster/ml/kv: reconcile failed: API down; retry in 1000ms']);
    jest.advanceTimersByTime(999);
    await flush();
    expect(m.calls).toHaveLength(1);
    jest.advanceTimersByTime(1);
    await flush();
    expect(m.calls).toHaveLength(2);
    m.calls[1].finish(new TerminalError('bad spec'));
    await flush();
    jest.advanceTimersByTime(600_000);
    await flush();
    expect(m.calls).toHaveLength(2);
    expect(logs[1]).toMatch(/bad spec \(not retried until the object changes\)/);
    c.stop();
  });

  it('requeues after requeueAfter for expected waits', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
    const m = manual();
    const c = new Controller({ StoreSegment: m.fn }, () => {});
    c.start();
    c.enqueue('StoreSegment', 'ml', 'pool');
    await flush();
    m.calls[0].finish({ requeueAfterMs: 5000 });
    await flush();
    jest.advanceTimersByTime(5000);
    await flush();
    expect(m.calls.map((x) => x.key)).toEqual(['ml/pool', 'ml/pool']);
    c.stop();
  });
});
