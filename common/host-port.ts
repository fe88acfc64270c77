// host:port, parsed and written in one place: "host:port", and "[v6]:port" for an IPv6 address
// (a bare IPv6 address is ambiguous and refused). Callers put the error in their own typed
// error with their context (which flag or setting held the address).

export interface HostPort {
  host: string;
  port: number;
}

const HOST_PORT = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/;[\]]+)):(\d{1,5})$/;

/** host and port of `text`, or undefined when it is not host:port with a port in 1..65535. */
export function splitHostPort(text: string): HostPort | undefined {
  const m = HOST_PORT.exec(text.trim());
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1] ?? m[2], port };
}

/** splitHostPort, throwing `invalid <what> "<text>": expected host:port` on a malformed address. */
export function parseHostPort(text: string, what = 'address'): HostPort {
  const hp = splitHostPort(text);
  if (hp === undefined) throw new Error(`invalid ${what} "${text}": expected host:port`);
  return hp;
}

/** host:port, with an IPv6 host in brackets. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
