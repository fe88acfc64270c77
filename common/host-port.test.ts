import { joinHostPort, parseHostPort, splitHostPort } from './host-port.js';

describe('host:port', () => {
  it('splits host:port and [v6]:port, trimming spaces', () => {
    expect(splitHostPort('127.0.0.1:50051')).toEqual({ host: '127.0.0.1', port: 50051 });
    expect(splitHostPort(' store-0.store.ns.svc:50052 ')).toEqual({ host: 'store-0.store.ns.svc', port: 50052 });
    expect(splitHostPort('[::1]:9')).toEqual({ host: '::1', port: 9 });
    expect(splitHostPort('[fe80::1%eth0]:9')).toBeUndefined(); // a zone id is not an address here
  });

  it.each(['127.0.0.1', ':80', 'h:0', 'h:99999', 'h:x', '::1:80', 'a b:1', 'http://h:1', 'h:1/x', '[::1]', ''])('refuses %j', (text) => {
    expect(splitHostPort(text)).toBeUndefined();
    expect(() => parseHostPort(text, 'master address')).toThrow(`invalid master address "${text}": expected host:port`);
  });

  it('writes an IPv6 host in brackets, and round-trips', () => {
    expect(joinHostPort('10.0.0.1', 80)).toBe('10.0.0.1:80');
    expect(joinHostPort('::1', 80)).toBe('[::1]:80');
    for (const [host, port] of [
      ['::1', 1],
      ['h', 65535],
    ] as const)
      expect(splitHostPort(joinHostPort(host, port))).toEqual({ host, port });
  });
});
