// The startup budget grows with the segment, so a store pod pre-faulting 64 GiB is not killed by
// its probes before it is ready, and a StatefulSet's container carries it.
import { startupBudgetSeconds, segmentStartupProbe } from './startup-probe.js';

const GiB = 2 ** 30;

test('the budget is 30 s plus 2 s per GiB, rounded up', () => {
  expect(startupBudgetSeconds(0)).toBe(30);
  expect(startupBudgetSeconds(GiB / 2)).toBe(31);
  expect(startupBudgetSeconds(64 * GiB)).toBe(158);
  expect(startupBudgetSeconds(1024 * GiB)).toBe(2078);
});

test('the probe covers at least the budget, polling every 2 s', () => {
  for (const size of [0, GiB, 16 * GiB + 1, 64 * GiB]) {
    const p = segmentStartupProbe(size, '/health', 'http');
    expect(p.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(p.periodSeconds).toBe(2);
    expect(p.periodSeconds! * p.failureThreshold!).toBeGreaterThanOrEqual(startupBudgetSeconds(size));
    expect(p.periodSeconds! * p.failureThreshold!).toBeLessThan(startupBudgetSeconds(size) + 2);
  }
});
