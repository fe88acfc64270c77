import { once } from 'node:events';
import { clockWith } from '../common/clock.js';
import { createServer, connect, type AddressInfo } from 'node:net';
import { Logger } from '../common/logger.js';
import type { SweepResult } from './core-port.js';
import { Sweeper } from './sweeper.js';

function setup(sweep: (now: number) => SweepResult): { s: Sweeper; logs: string[] } {
  const logs: string[] = [];
  const s = new Sweeper(
    { sweep },
    clockWith(() => 42),
    new Logger({ program: 't', stderr: (l) => logs.push(l) }),
    200,
  );
  return { s, logs };
}

describe('Sweeper', () => {
  it('passes the clock to core.sweep and logs what happened', () => {
    const nows: number[] = [];
    const { s, logs } = setup((now) => {
      nows.push(now);
      return { droppedClients: ['c1'], unmountedSegments: ['seg-a', 'seg-b'], evictedObjects: 3, releasedZombies: 1, underReplicated: 0 };
    });
    s.tick();
    expect(nows).toEqual([42]);
    const text = logs.join('');
    expect(text).toMatch(/W.*clients silent past --client_ttl, dropped: c1/);
    expect(text).toMatch(/segments unmounted: seg-a, seg-b/);
    expect(text).toMatch(/evicted 3 objects/);
    expect(text).toMatch(/released 1 uncompleted puts/);
  });

  it('says nothing when nothing happened', () => {
    const { s, logs } = setup(() => ({ droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 }));
    s.tick();
    expect(logs).toEqual([]);
  });

  it('logs when objects start waiting for a replica copy and when none is left', () => {
    const short = [0, 5, 3, 0, 0];
    const { s, logs } = setup(() => ({ droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: short.shift()! }));
    for (let i = 0; i < 5; i++) s.tick();
    expect(logs).toHaveLength(2);
    expect(logs[0]).toMatch(/W.*5 objects lost a replica; copying them to other segments/);
    expect(logs[1]).toMatch(/re-replication done/);
  });

  it('logs each copy/move task that finished, a failure with its code', () => {
    const { s, logs } = setup(() => ({
      droppedClients: [],
      unmountedSegments: [],
      evictedObjects: 0,
      releasedZombies: 0,
      underReplicated: 0,
      finishedTasks: {
        tasks: [
          { id: 7, kind: 'copy', key: 'k1', ok: true, errorCode: 0 },
          { id: 8, kind: 'move', key: 'k2', ok: false, errorCode: -400 },
        ],
        more: 3,
      },
    }));
    s.tick();
    expect(logs).toHaveLength(3);
    expect(logs[0]).toMatch(/I.*task 7 \(copy of "k1"\) succeeded/);
    expect(logs[1]).toMatch(/W.*task 8 \(move of "k2"\) failed: SEGMENT_NOT_FOUND/);
    expect(logs[2]).toMatch(/3 more tasks finished/);
  });

  it('logs a failing sweep and survives it', () => {
    const { s, logs } = setup(() => {
      throw new Error('bad state');
    });
    expect(() => s.tick()).not.toThrow();
    expect(logs.join('')).toMatch(/E.*sweep failed: Error: bad state/);
  });

  it('sweeps after reading the heartbeats that arrived while the event loop was held up', async () => {
    const events: string[] = [];
    let swept!: () => void;
    const sweptOnce = new Promise<void>((resolve) => (swept = resolve));
    const s = new Sweeper(
      {
        sweep: () => {
          events.push('sweep');
          swept();
          return { droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 0, underReplicated: 0 };
        },
      },
      clockWith(() => 0), // real timers: the test is about the event loop's phases
      new Logger({ program: 't', stderr: () => undefined }),
      5,
    );
    const server = createServer((sock) => sock.on('data', () => events.push('ping')));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    s.start();
    // In the check phase: a heartbeat goes out, then the loop is held past the sweep interval, so
    // the next turn finds both the sweep timer due and the heartbeat waiting to be read.
    setImmediate(() => {
      client.write('ping');
      const until = performance.now() + 30;
      while (performance.now() < until);
    });
    await sweptOnce;
    s.stop();
    client.destroy();
    server.close();
    expect(events.slice(0, 2)).toEqual(['ping', 'sweep']);
  });
});
