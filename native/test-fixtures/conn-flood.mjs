// Test peer: opens many TCP connections to an endpoint from one source address and says nothing
// on them, reporting on stdout {"connected":n,"failed":n} once every attempt resolved and then
// {"closed":n} each time the far side closes one. Exits (closing every connection) on stdin EOF.
// Usage: node conn-flood.mjs <host:port> <count> <localAddress>
import { connect } from 'node:net';

const [endpoint, countText, localAddress] = process.argv.slice(2);
const i = endpoint.lastIndexOf(':');
const host = endpoint.slice(0, i);
const port = Number(endpoint.slice(i + 1));
const count = Number(countText);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

let connected = 0;
let failed = 0;
let closed = 0;
let reported = false;
const socks = [];
await Promise.all(
  Array.from(
    { length: count },
    () =>
      new Promise((res) => {
        const s = connect({ host, port, localAddress });
        socks.push(s);
        s.on('error', () => {});
        s.once('connect', () => {
          connected++;
          res();
        });
        s.once('close', () => {
          if (s.connecting) failed++;
          closed++;
          res();
          if (reported) say({ closed });
        });
      }),
  ),
);
reported = true;
say({ connected, failed, closed });
process.stdin.on('data', () => {});
process.stdin.on('end', () => {
  for (const s of socks) s.destroy();
  process.exit(0);
});
