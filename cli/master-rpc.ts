// The `store` CLI's connection to the master's RPC port (the fast channel, client/master-client.ts)
// for rm, health and get's size lookup: one connection, the CLI's timeout for connect and calls,
// an unreachable master as exit 3.
import { MasterClient } from '../client/master-client.js';
import { MasterAuthError } from '../client/master-channel-errors.js';
import { UnreachableError } from './cli-errors.js';

/** A MasterClient of `leader` (host:port) proving `secret`; unreachable -> UnreachableError. */
export async function connectMaster(leader: string, timeoutMs: number, secret: Buffer | undefined): Promise<MasterClient> {
  try {
    return await MasterClient.connect(leader, { requestTimeoutMs: timeoutMs, connectTimeoutMs: timeoutMs, secret: secret ?? null });
  } catch (e) {
    if (e instanceof MasterAuthError) throw e;
    throw new UnreachableError(`cannot reach the master at ${leader}: ${(e as Error).message}`, { cause: e });
  }
}
