// What half-sent requests do to a master (`node dist/bench/connection-flood.js [--connections N]
// [--seconds S] [--main path/to/master/main.js] [-- master flags...]`; not a test): starts a
// store_master on 127.0.0.1 with the given flags, opens N fast-channel connections that each send
// a request frame of 16 MiB short by 100 bytes and then nothing, and prints the master's RSS (and
// peak) and how many of those connections it has closed, once a second. `--main` measures another
// build of the master (e.g. one from before the connection limits).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { CHANNEL_MAGIC, FrameKind, MAX_REQUEST_PAYLOAD_BYTES, encodeFrame } from '../common/channel-frame.js';
import { masterMethodByName } from '../common/master-proto.js';
import { clusterEnv } from '../sidecar/local-cluster.js';

const dash = process.argv.indexOf('--');
const own = dash < 0 ? process.argv.slice(2) : process.argv.slice(2, dash);
const masterFlags = dash < 0 ? [] : process.argv.slice(dash + 1);
function arg(name: string, fallback: string): string {
  const i = own.indexOf(`--${name}`);
  return i >= 0 && i + 1 < own.length ? own[i + 1] : fallback;
}
const CONNECTIONS = Number(arg('connections', '64'));
const SECONDS = Number(arg('seconds', '8'));
const MAIN = arg('main', fileURLToPath(new URL('../master/main.js', import.meta.url)));

const mb = (pid: number, field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function main(): Promise<void> {
  // An authenticated master: the flood's connections are strangers without the secret, refused
  // by the handshake (a frame header announcing more than the handshake's 64 bytes ends it at once).
  const proc = spawn(process.execPath, [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--enable_metric_reporting=false', ...masterFlags], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: clusterEnv(),
  });
  let err = '';
  const rpc = await new Promise<string>((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening: rpc=(\S+)/.exec(err);
      if (m) resolve(m[1]);
    });
    proc.once('exit', (code) => reject(new Error(`master exited with ${code}: ${err}`)));
  });
  const [host, port] = rpc.split(':');
  const before = mb(proc.pid!, 'VmRSS');
  const header = encodeFrame(FrameKind.REQUEST, 1, masterMethodByName.get('PutStart')!.index, Buffer.alloc(0));
  header.writeUInt32LE(MAX_REQUEST_PAYLOAD_BYTES, 0);
  const filler = Buffer.alloc(MAX_REQUEST_PAYLOAD_BYTES - 100, 0x61);
  let closed = 0;
  for (let i = 0; i < CONNECTIONS; i++) {
    const s = connect(Number(port), host);
    s.on('error', () => undefined);
    s.on('close', () => closed++);
    s.write(Buffer.concat([CHANNEL_MAGIC, header]));
    s.write(filler);
  }
  console.log(
    `store_master ${MAIN} ${masterFlags.join(' ')}: ${CONNECTIONS} connections each sending a ${MAX_REQUEST_PAYLOAD_BYTES}-byte frame short by 100 bytes; RSS before ${before.toFixed(0)} MB`,
  );
  for (let t = 1; t <= SECONDS; t++) {
    await sleep(1000);
    console.log(`t=${t}s RSS ${mb(proc.pid!, 'VmRSS').toFixed(0)} MB (peak ${mb(proc.pid!, 'VmHWM').toFixed(0)} MB); connections closed by the master: ${closed}/${CONNECTIONS}`);
  }
  proc.kill('SIGTERM');
  process.exit(0);
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
