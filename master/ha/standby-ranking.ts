// Which standby image may be elected (docs/ha.md "Which image may be elected"). Two records in the
// election backend decide it, beside the leader record:
//  - `insync` (no TTL), written by the leader: its term (view_version) and the streams (sessions)
//    its placements wait for. A term writes it, with no member, before it serves; a stream joins
//    before it counts as synced, and leaves before the leader stops waiting for it. So an image
//    whose (term, session) is not in the latest record may miss a removal whose space was handed
//    out again: it is not usable (the standby starts empty rather than serve it).
//  - `standby_<address>` (TTL), written by each standby every retry period and when its stream
//    ends: the term, session and change count of its image. A candidate whose usable image is
//    behind another live standby's usable image does not campaign, so with --ha_commit_acks=1 the
//    most advanced standby (which has every acknowledged commit) wins while it lives.
// Pure: parsing and the decision; master/ha/campaign-guard.ts does the I/O.

/** A standby's image: the leader's term it follows, its stream there, the changes applied. */
export interface ImagePosition {
  epoch: number;
  session: string;
  seq: number;
}

export interface InSyncRecord {
  epoch: number;
  members: string[];
}

export const INSYNC_RECORD = 'insync';

/** The record name of a standby advertised at `address` (backend record names are [A-Za-z0-9._-]). */
export function standbyRecordName(address: string): string {
  return `standby_${address.replace(/[^A-Za-z0-9.-]/g, '_')}`.slice(0, 63);
}

export function encodeInSync(r: InSyncRecord): string {
  return JSON.stringify(r);
}

export function parseInSync(v: string | undefined): InSyncRecord | undefined {
  if (v === undefined) return undefined;
  try {
    const o = JSON.parse(v) as Partial<InSyncRecord>;
    if (typeof o.epoch === 'number' && Array.isArray(o.members) && o.members.every((m) => typeof m === 'string')) return { epoch: o.epoch, members: o.members };
  } catch {
    // not ours: no usable image
  }
  return undefined;
}

export interface StandbyRecord {
  address: string;
  /** Absent: this standby holds no complete image. */
  image?: ImagePosition;
}

export function encodeStandby(r: StandbyRecord): string {
  return JSON.stringify(r);
}

export function parseStandby(v: string): StandbyRecord | undefined {
  try {
    const o = JSON.parse(v) as Partial<StandbyRecord>;
    if (typeof o.address !== 'string') return undefined;
    const i = o.image;
    if (i === undefined) return { address: o.address };
    if (typeof i.epoch === 'number' && typeof i.session === 'string' && typeof i.seq === 'number')
      return { address: o.address, image: { epoch: i.epoch, session: i.session, seq: i.seq } };
  } catch {
    // ignored: a record that does not parse ranks nobody
  }
  return undefined;
}

/** Whether an image may be imported: the latest leader listed its stream (a later term, or a drop, removes it). */
export function imageUsable(image: ImagePosition | undefined, insync: InSyncRecord | undefined): boolean {
  return image !== undefined && insync !== undefined && image.epoch === insync.epoch && insync.members.includes(image.session);
}

export type CampaignDecision = { campaign: true; usable: boolean } | { campaign: false; usable: boolean; ahead: string };

/**
 * Whether the standby at `self` holding `image` may campaign now, given every record. It may
 * unless another standby's usable image has more changes than its own (usable) one; `usable`
 * says whether its own image may be imported.
 */
export function decideCampaign(self: string, image: ImagePosition | undefined, records: Map<string, string>): CampaignDecision {
  const insync = parseInSync(records.get(INSYNC_RECORD));
  const usable = imageUsable(image, insync);
  const mine = usable ? image!.seq : -1;
  let best: { address: string; seq: number } | undefined;
  for (const [name, v] of records) {
    if (name === INSYNC_RECORD) continue;
    const r = parseStandby(v);
    if (r === undefined || r.address === self || !imageUsable(r.image, insync)) continue;
    if (r.image!.seq > mine && (best === undefined || r.image!.seq > best.seq)) best = { address: r.address, seq: r.image!.seq };
  }
  return best === undefined ? { campaign: true, usable } : { campaign: false, usable, ahead: best.address };
}
