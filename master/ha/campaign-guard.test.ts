// The campaign guard's standby record writes: an unchanged position is written again only after a
// tenth of the record's TTL (hurried attempts add reads, not writes), a changed one at once, and
// the write at the end of a stream always (the ranking needs the record's TTL to count from then).
import type { ElectionBackend } from './election-backend.js';
import { CampaignGuard } from './campaign-guard.js';
import type { ImagePosition } from './standby-ranking.js';

class CountingBackend implements ElectionBackend {
  readonly description = 'memory';
  writes: string[] = [];
  tryAcquire = async () => ({ acquired: false });
  renew = async () => false;
  release = async () => undefined;
  readLeader = async () => 'leader:1';
  putRecord = async (name: string, value: string) => void this.writes.push(`${name}=${value}`);
  putLeaderRecord = async () => undefined;
  readRecords = async () => new Map<string, string>();
  close = async () => undefined;
}

describe('CampaignGuard.publish', () => {
  it('writes an unchanged record at most once per tenth of its TTL, a changed one or a forced one at once', async () => {
    const b = new CountingBackend();
    let now = 0;
    let position: ImagePosition | undefined = { epoch: 1, session: 's', seq: 10 };
    const guard = new CampaignGuard(
      b,
      () => 'me:1',
      { position: () => position, discard: () => undefined },
      10_000,
      { info: () => undefined, warn: () => undefined },
      () => now,
    );
    await guard.publish();
    now = 500;
    await guard.check(); // a (hurried) attempt while the leader stands: no second write
    expect(b.writes).toHaveLength(1);
    now = 999;
    await guard.publish();
    expect(b.writes).toHaveLength(1);
    now = 1000; // a tenth of the TTL
    await guard.publish();
    expect(b.writes).toHaveLength(2);
    position = { epoch: 1, session: 's', seq: 11 };
    await guard.publish();
    expect(b.writes).toHaveLength(3);
    expect(b.writes[2]).toMatch(/"seq":11/);
    await guard.publish(true); // the stream ended
    expect(b.writes).toHaveLength(4);
  });
});
