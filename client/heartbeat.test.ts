import { Heartbeat } from './heartbeat.js';
import type { PingResponse__Output } from '../proto/gen/store/PingResponse.js';

function manualTimers() {
  const pending: (() => void)[] = [];
  return { schedule: (_ms: number, fn: () => void) => (pending.push(fn), () => void pending.splice(pending.indexOf(fn), 1)), pending };
}
const answer = (need_remount: boolean): PingResponse__Output => ({ status_code: 0, view_version: 1, need_remount, fences: [], copies: [] });

describe('heartbeat', () => {
  it('pings every interval and remounts when the master no longer knows the client', async () => {
    const timers = manualTimers();
    const replies = [answer(false), answer(true), answer(false)];
    let remounts = 0;
    const hb = new Heartbeat({ intervalMs: 1000, ping: async () => replies.shift()!, remount: async () => void remounts++, schedule: timers.schedule });
    hb.start();
    for (let i = 0; i < 3; i++) {
      expect(timers.pending).toHaveLength(1);
      timers.pending.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(remounts).toBe(1);
    expect(replies).toHaveLength(0);
    await hb.stop();
    expect(timers.pending).toHaveLength(0);
  });

  it('keeps beating after a failed ping and reports it', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const hb = new Heartbeat({
      intervalMs: 1000,
      ping: async () => {
        if (++calls === 1) throw new Error('master unreachable');
        return answer(false);
      },
      remount: async () => {},
      onError: (e) => errors.push(e),
    });
    await hb.beat();
    expect(hb.failures).toBe(1);
    await hb.beat();
    expect(hb.failures).toBe(0);
    expect(errors).toHaveLength(1);
  });

  it('nudge pings at once and starts the interval again; not while a ping is in flight', async () => {
    const timers = manualTimers();
    let pings = 0;
    let release: (() => void) | undefined;
    const hb = new Heartbeat({
      intervalMs: 1000,
      ping: () => new Promise((r) => { pings++; release = () => r(answer(false)); }),
      remount: async () => {},
      schedule: timers.schedule,
    });
    hb.start();
    hb.nudge();
    expect(pings).toBe(1);
    expect(timers.pending).toHaveLength(0); // the interval's timer was cancelled
    hb.nudge();
    expect(pings).toBe(1);
    release!();
    await new Promise((r) => setImmediate(r));
    expect(timers.pending).toHaveLength(1);
    await hb.stop();
  });
});
