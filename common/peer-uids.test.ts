import { allowedPeerUids, parsePeerUids, peerRefusal, peerUidAllowed } from './peer-uids.js';

describe('peer uids', () => {
  it('parses comma-separated uid lists and refuses anything else', () => {
    expect(parsePeerUids('', 'X')).toEqual([]);
    expect(parsePeerUids(' 1000, 1001 ,', 'X')).toEqual([1000, 1001]);
    expect(parsePeerUids('0', 'X')).toEqual([0]);
    for (const bad of ['root', '-1', '1.5', '4294967296', '1e3', '0x10']) expect(() => parsePeerUids(bad, '--peer_uids')).toThrow(/--peer_uids: .* is not a uid/);
  });

  it('allows the own uid, root and the listed ones only; an unknown peer never', () => {
    const allowed = allowedPeerUids(1000, [1001, 1000]);
    expect(allowed).toEqual([1000, 0, 1001]);
    expect(allowedPeerUids(0, [])).toEqual([0]);
    expect(peerUidAllowed({ pid: 7, uid: 1000, gid: 1000 }, allowed)).toBe(true);
    expect(peerUidAllowed({ pid: 7, uid: 1001, gid: 5 }, allowed)).toBe(true);
    expect(peerUidAllowed({ pid: 7, uid: 0, gid: 0 }, allowed)).toBe(true);
    expect(peerUidAllowed({ pid: 7, uid: 1002, gid: 1000 }, allowed)).toBe(false); // the group does not matter
    expect(peerUidAllowed({ pid: 7, uid: 1000, gid: 1000 }, [1001])).toBe(false); // only what the list says
    expect(peerUidAllowed(null, allowed)).toBe(false);
  });

  it('says who was refused and how to allow it', () => {
    expect(peerRefusal('dummy-client socket /s', { pid: 9, uid: 1002, gid: 1 }, [1000], '--peer_uids')).toBe(
      'dummy-client socket /s: refused pid 9 uid 1002: not an allowed uid (allowed: 1000; --peer_uids adds more)',
    );
  });
});
