// The regular expressions of GetReplicaListByRegex and RemoveByRegex, compiled for V8's linear-time
// engine. Both run a client's pattern over every key in the master, on the one thread that also
// answers heartbeats: on the default backtracking engine a pattern such as `^(a+)+$` takes
// exponential time on a key like 'aaa...a!' (measured: 13 s on one 32-character key), and a master
// stalled that long drops every live client as silent. The linear engine (the RegExp 'l' flag)
// matches in time linear in the key; it has no backreferences or lookaround, so a pattern using
// them is refused like one that does not compile (INVALID_PARAMS).
import { setFlagsFromString } from 'node:v8';

// Lets RegExp accept the 'l' flag; it changes nothing for regular expressions without it.
setFlagsFromString('--enable-experimental-regexp-engine');

/** A key pattern, or null when it is empty, does not compile, or cannot run in linear time. */
export function compileKeyRegex(source: unknown): RegExp | null {
  if (typeof source !== 'string' || source.length === 0) return null;
  try {
    // eslint-disable-next-line no-invalid-regexp -- 'l' is V8's linear-time engine, enabled above
    return new RegExp(source, 'l');
  } catch {
    return null;
  }
}
