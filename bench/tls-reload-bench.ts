// Cost of the TLS files' reload check (`node dist/bench/tls-reload-bench.js`; not a test): a full
// load (read, parse and check certificate, key and CA: what a renewal costs) and the check the
// servers run every 10 s when nothing changed (read and compare the bytes), in microseconds.
import { rmSync } from 'node:fs';
import { realClock } from '../common/clock.js';
import { loadServerTls } from '../common/tls-material.js';
import { TlsReloader } from '../common/tls-reloader.js';
import { makeTestCerts } from '../e2e/tls-certs.js';

function perCallUs(n: number, fn: () => unknown): number {
  for (let i = 0; i < Math.min(100, n); i++) fn();
  const t = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ((performance.now() - t) / n) * 1000;
}

const c = makeTestCerts();
try {
  const paths = { cert: c.serverCert, key: c.serverKey, ca: c.ca };
  const full = perCallUs(2000, () => loadServerTls(paths));
  const reloader = new TlsReloader({ paths, current: loadServerTls(paths)!, apply: () => {}, clock: realClock, log: { info: () => {}, warn: () => {} } });
  const idle = perCallUs(20000, () => reloader.check());
  console.log(`TLS reload: full load (read + parse + key check) ${full.toFixed(0)} us; check with nothing changed ${idle.toFixed(0)} us`);
} finally {
  rmSync(c.dir, { recursive: true, force: true });
}
