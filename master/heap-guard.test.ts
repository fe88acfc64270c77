import { Logger } from '../common/logger.js';
import { HeapGuard } from './heap-guard.js';
import { FakeClock } from '../common/clock.js';

describe('HeapGuard', () => {
  it('sets full from 70% of the heap limit and clears it under 60%, saying so once each way', () => {
    const logs: string[] = [];
    let used = 0;
    const g = new HeapGuard(new Logger({ program: 't', stderr: (l) => logs.push(l) }), () => ({ used_heap_size: used, heap_size_limit: 1000 }));
    const at = (u: number): boolean => {
      used = u;
      g.check();
      return g.state.full;
    };
    expect([at(500), at(699), at(700), at(900), at(650), at(600), at(599), at(650)]).toEqual([false, false, true, true, true, true, false, false]);
    expect(logs).toHaveLength(2);
    expect(logs[0]).toMatch(/W.*refusing new objects \(NO_AVAILABLE_HANDLE\)/);
    expect(logs[1]).toMatch(/I.*accepting new objects again/);
  });

  it('once started, notices a full heap within one 50 ms check period, and stops checking when stopped', async () => {
    const clock = new FakeClock();
    let used = 0;
    const g = new HeapGuard(new Logger({ program: 't', stderr: () => undefined }), () => ({ used_heap_size: used, heap_size_limit: 1000 }), clock);
    g.start();
    used = 800;
    await clock.advance(49);
    expect(g.state.full).toBe(false);
    await clock.advance(1);
    expect(g.state.full).toBe(true);
    g.stop();
    used = 0;
    await clock.advance(1000);
    expect(g.state.full).toBe(true);
    expect(clock.pending).toBe(0);
  });
});
