import { Heartbeat } from './heartbeat.js';
import { FakeClock } from '../common/clock.js';
import type { PingResponse__Output } from '../proto/gen/store/PingResponse.js';
const answer = (need_remount: boolean): PingResponse__Output => ({
  status_code: 0,
  view_version: 1,
  need_remount,
  fences: [],
  copies: [],
  file_tier_root: '',
  copy_push: false,
  more_copies: false,
});

describe('heartbeat', () => {
  it('pings every interval and remounts when the master no longer knows the client', async () => {
    const clock = new FakeClock();
    const replies = [answer(false), answer(true), answer(false)];
    let remounts = 0;
    const hb = new Heartbeat({ intervalMs: 1000, ping: async () => replies.shift()!, remount: async () => void remounts++, clock });
    hb.start();
    await clock.advance(999);
    expect(replies).toHaveLength(3); // not before the interval
    await clock.advance(1);
    expect(replies).toHaveLength(2);
    await clock.advance(2000);
    expect(remounts).toBe(1);
    expect(replies).toHaveLength(0);
    await hb.stop();
    expect(clock.pending).toBe(0);
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

  it('nudge pings at once and starts the interval again; one during a ping pings once more after it', async () => {
    const clock = new FakeClock();
    let pings = 0;
    let release: (() => void) | undefined;
    const hb = new Heartbeat({
      intervalMs: 1000,
      ping: () =>
        new Promise((r) => {
          pings++;
          release = () => r(answer(false));
        }),
      remount: async () => {},
      clock,
    });
    hb.start();
    hb.nudge();
    expect(pings).toBe(1);
    expect(clock.pending).toBe(0); // the interval's timer was cancelled
    release!();
    await clock.advance(0);
    expect(clock.pending).toBe(1); // the interval starts again after the ping
    hb.nudge();
    expect(pings).toBe(2);
    // nudged twice while that ping is in flight (a copy notice after the master answered it): one more ping, not two
    hb.nudge();
    hb.nudge();
    expect(pings).toBe(2);
    release!();
    await clock.advance(0);
    expect(pings).toBe(3);
    expect(clock.pending).toBe(0); // no interval while the extra ping is in flight
    release!();
    await clock.advance(0);
    expect(clock.pending).toBe(1);
    await clock.advance(1000);
    expect(pings).toBe(4);
    release!();
    await hb.stop();
  });
});
