import { readFileSync } from 'node:fs';
import { ErrorCode } from './error-code.js';
import { masterMethods } from './master-proto.js';

describe('master method table', () => {
  it('numbers the RPCs in proto declaration order: the fast-channel method numbers are wire protocol', () => {
    expect(masterMethods.map((m) => `${m.index}:${m.name}`)).toEqual(
      'Ping MountSegment UnmountSegment ExistKey BatchExistKey GetReplicaList BatchGetReplicaList GetReplicaListByRegex PutStart BatchPutStart PutEnd BatchPutEnd PutRevoke BatchPutRevoke UpsertStart BatchUpsertStart UpsertEnd BatchUpsertEnd UpsertRevoke BatchUpsertRevoke Remove RemoveByRegex RemoveAll BatchQueryIp BatchReplicaClear ReplicaCopied CreateCopyTask CreateMoveTask QueryTask BatchReplicaCopied'
        .split(' ')
        .map((n, i) => `${i}:${n}`),
    );
    expect(masterMethods.find((m) => m.name === 'GetReplicaList')?.call).toBe('getReplicaList');
  });

  it('documents every method number and every ErrorCode', () => {
    const channel = readFileSync(new URL('../docs/master-channel.md', import.meta.url), 'utf8');
    for (const m of masterMethods) expect(channel).toContain(`| ${m.index} | ${m.name} |`);
    const codes = readFileSync(new URL('../docs/error-codes.md', import.meta.url), 'utf8');
    for (const [name, code] of Object.entries(ErrorCode)) expect(codes).toContain(`| ${code} | \`${name}\` |`);
  });
});
