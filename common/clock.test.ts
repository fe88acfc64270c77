// The virtual clock the shells' tests run on: callbacks fire at their due time in order, each at
// its own time, with promise jobs settled in between; cancel, repeats and until() behave.
import { every, FakeClock, realClock } from './clock.js';

test('advance fires due callbacks in time order (ties in scheduling order), each at its own time', async () => {
  const c = new FakeClock(0);
  const seen: string[] = [];
  c.schedule(30, () => seen.push(`c@${c.now()}`));
  c.schedule(10, () => seen.push(`a@${c.now()}`));
  c.schedule(10, () => seen.push(`b@${c.now()}`));
  c.schedule(31, () => seen.push('late'));
  await c.advance(30);
  expect(seen).toEqual(['a@10', 'b@10', 'c@30']);
  expect(c.now()).toBe(30);
  expect(c.pending).toBe(1);
});

test('a callback may schedule another inside the window; promise jobs run before the next fires', async () => {
  const c = new FakeClock(0);
  const seen: string[] = [];
  c.schedule(5, () => {
    void Promise.resolve().then(() => seen.push('job'));
    c.schedule(5, () => seen.push(`inner@${c.now()}`));
  });
  c.schedule(8, () => seen.push('eight'));
  await c.advance(10);
  expect(seen).toEqual(['job', 'eight', 'inner@10']);
});

test('cancel stops a callback; every repeats until cancelled', async () => {
  const c = new FakeClock(0);
  let fired = 0;
  const cancel = c.schedule(1, () => fired++);
  cancel();
  cancel();
  let ticks = 0;
  const stop = every(c, 100, () => ticks++);
  await c.advance(350);
  expect([fired, ticks]).toEqual([0, 3]);
  stop();
  await c.advance(1000);
  expect(ticks).toBe(3);
  expect(c.pending).toBe(0);
});

test('until advances to a condition or fails past its limit', async () => {
  const c = new FakeClock(0);
  let done = false;
  c.schedule(40, () => (done = true));
  await c.until(() => done, 100, 10);
  expect(c.now()).toBe(40);
  await expect(c.until(() => false, 50, 10)).rejects.toThrow(/not done after 50 ms/);
});

test('the real clock is monotonic and its timers fire', async () => {
  const t0 = realClock.now();
  await new Promise<void>((resolve) => realClock.schedule(1, resolve, { keepAlive: true }));
  expect(realClock.now()).toBeGreaterThan(t0);
});
