// Which standby image may be elected (standby-ranking.ts): an image is usable only when the last
// leader's in-sync record names its term and stream; a candidate does not campaign while another
// standby's usable image has more changes; records that do not parse rank nobody.
import { decideCampaign, encodeInSync, encodeStandby, imageUsable, INSYNC_RECORD, parseStandby, standbyRecordName, type ImagePosition } from './standby-ranking.js';

const at = (epoch: number, session: string, seq: number): ImagePosition => ({ epoch, session, seq });

function records(insync: { epoch: number; members: string[] } | undefined, standbys: [string, ImagePosition | undefined][]): Map<string, string> {
  const m = new Map<string, string>();
  if (insync) m.set(INSYNC_RECORD, encodeInSync(insync));
  for (const [address, image] of standbys) m.set(standbyRecordName(address), encodeStandby({ address, image }));
  return m;
}

describe('imageUsable', () => {
  it('needs the same term and the stream listed', () => {
    expect(imageUsable(at(7, '7.1', 10), { epoch: 7, members: ['7.1', '7.2'] })).toBe(true);
    expect(imageUsable(at(7, '7.3', 10), { epoch: 7, members: ['7.1', '7.2'] })).toBe(false); // dropped
    expect(imageUsable(at(7, '7.1', 10), { epoch: 9, members: ['7.1'] })).toBe(false); // a later term began
    expect(imageUsable(at(7, '7.1', 10), undefined)).toBe(false); // no record: nothing is usable
    expect(imageUsable(undefined, { epoch: 7, members: [] })).toBe(false);
  });
});

describe('decideCampaign', () => {
  const insync = { epoch: 7, members: ['7.1', '7.2'] };

  it('the most advanced usable image campaigns; the one behind it waits', () => {
    const r = records(insync, [
      ['10.0.0.1:50051', at(7, '7.1', 100)],
      ['10.0.0.2:50051', at(7, '7.2', 140)],
    ]);
    expect(decideCampaign('10.0.0.1:50051', at(7, '7.1', 100), r)).toEqual({ campaign: false, usable: true, ahead: '10.0.0.2:50051' });
    expect(decideCampaign('10.0.0.2:50051', at(7, '7.2', 140), r)).toEqual({ campaign: true, usable: true });
  });

  it('equal positions both campaign (either has every acknowledged commit)', () => {
    const r = records(insync, [
      ['a:1', at(7, '7.1', 140)],
      ['b:1', at(7, '7.2', 140)],
    ]);
    expect(decideCampaign('a:1', at(7, '7.1', 140), r).campaign).toBe(true);
    expect(decideCampaign('b:1', at(7, '7.2', 140), r).campaign).toBe(true);
  });

  it('a dropped image is not usable and ranks nobody, however far it got', () => {
    const r = records({ epoch: 7, members: ['7.2'] }, [
      ['a:1', at(7, '7.1', 900)],
      ['b:1', at(7, '7.2', 140)],
    ]);
    expect(decideCampaign('a:1', at(7, '7.1', 900), r)).toEqual({ campaign: false, usable: false, ahead: 'b:1' });
    expect(decideCampaign('b:1', at(7, '7.2', 140), r)).toEqual({ campaign: true, usable: true });
  });

  it('with no usable image anywhere, everybody campaigns (and starts empty)', () => {
    const r = records({ epoch: 9, members: [] }, [
      ['a:1', at(7, '7.1', 900)],
      ['b:1', undefined],
    ]);
    expect(decideCampaign('a:1', at(7, '7.1', 900), r)).toEqual({ campaign: true, usable: false });
    expect(decideCampaign('b:1', undefined, r)).toEqual({ campaign: true, usable: false });
  });

  it('its own record (an older write) does not rank it; records that do not parse are ignored', () => {
    const r = records(insync, [['a:1', at(7, '7.1', 500)]]);
    r.set('standby_junk', '{not json');
    r.set('standby_other', JSON.stringify({ address: 'c:1', image: { epoch: 'x' } }));
    expect(decideCampaign('a:1', at(7, '7.1', 100), r)).toEqual({ campaign: true, usable: true });
    expect(parseStandby('{not json')).toBeUndefined();
  });

  it("record names stay within the backends' alphabet", () => {
    expect(standbyRecordName('[fd00::1]:50051')).toMatch(/^[A-Za-z0-9._-]{1,63}$/);
    expect(standbyRecordName('10.0.0.1:50051')).toBe('standby_10.0.0.1_50051');
  });
});
