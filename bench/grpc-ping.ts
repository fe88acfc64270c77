// gRPC call rate of a master (`node dist/bench/grpc-ping.js [--main path/to/master/main.js] [--tls]`;
// not a test): starts a store_master on 127.0.0.1 and prints how many unary Ping calls a grpc-js
// client completes per second with 1 and 64 calls in flight, 3 s each, and how many new
// connections (connect, handshake, one Ping, close) it makes per second. `--main` measures another
// build; `--tls` serves gRPC over TLS (--tls_cert/--tls_key, certificates made with openssl).
// The fast channel (bench:master) is the clients' path; this is the compatibility path's cost.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { readFileSync, rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import { clusterEnv } from '../sidecar/local-cluster.js';
import { makeTestCerts } from '../e2e/tls-certs.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const MAIN = arg('main', fileURLToPath(new URL('../master/main.js', import.meta.url)));
const PHASE_MS = 3000;
const TLS = process.argv.includes('--tls');

async function main(): Promise<void> {
  const certs = TLS ? makeTestCerts() : undefined;
  const tlsArgs = certs ? [`--tls_cert=${certs.serverCert}`, `--tls_key=${certs.serverKey}`] : [];
  const proc = spawn(process.execPath, [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--enable_metric_reporting=false', ...tlsArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: clusterEnv(), // authenticated: each call carries x-kvstore-auth
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
  const creds = () => (certs ? grpc.credentials.createSsl(readFileSync(certs.ca)) : grpc.credentials.createInsecure());
  const mode = certs ? 'TLS' : 'plain';
  let client = new grpc.Client(rpc, creds(), grpcAuthOptions());
  const ping = Buffer.from([0x0a, 0x03, 0x61, 0x62, 0x63]); // PingRequest{client_id: "abc"}
  const call = (): Promise<Buffer> =>
    new Promise((resolve, reject) =>
      client.makeUnaryRequest(
        '/store.MasterService/Ping',
        (b: Buffer) => b,
        (b: Buffer) => b,
        ping,
        (e, r) => (e ? reject(e) : resolve(r as Buffer)),
      ),
    );
  for (let i = 0; i < 500; i++) await call();
  for (const inFlight of [1, 64]) {
    let n = 0;
    const t = performance.now();
    while (performance.now() - t < PHASE_MS) {
      await Promise.all(Array.from({ length: inFlight }, call));
      n += inFlight;
    }
    console.log(`gRPC Ping (${mode}), ${MAIN}: ${inFlight} in flight ${Math.round(n / (PHASE_MS / 1000)).toLocaleString('en-US')} calls/s`);
  }
  client.close();
  // New connections: each client connects (and with TLS, handshakes), calls once, closes.
  let conns = 0;
  const t = performance.now();
  while (performance.now() - t < PHASE_MS) {
    client = new grpc.Client(rpc, creds(), { ...grpcAuthOptions(), 'grpc.use_local_subchannel_pool': 1 });
    await call();
    client.close();
    conns++;
  }
  console.log(`gRPC Ping (${mode}), ${MAIN}: new connection + 1 call ${Math.round(conns / (PHASE_MS / 1000)).toLocaleString('en-US')} connections/s`);
  proc.kill('SIGTERM');
  if (certs) rmSync(certs.dir, { recursive: true, force: true });
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
