// A TCP port on 127.0.0.1 that nothing listens on right now, for servers a test starts itself
// (etcd, redis-server, store_master) that cannot be told to pick one and report it.
import { createServer, type AddressInfo } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
