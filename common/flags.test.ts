import { FlagError, FlagTable, HelpRequested, type FlagSpec } from './flags.js';

const specs: FlagSpec[] = [
  { name: 'port', kind: 'int', default: 50051, min: 0, max: 65535, help: 'port' },
  { name: 'enable_ha', kind: 'bool', default: false, help: 'ha' },
  { name: 'tcp_no_delay', kind: 'bool', default: true, help: 'nodelay' },
  { name: 'ratio', kind: 'float', default: 0.05, min: 0, max: 1, help: 'ratio' },
  { name: 'lease_ttl', kind: 'duration', unit: 'ms', default: 5000, help: 'ttl' },
  { name: 'client_ttl', kind: 'duration', unit: 's', default: 10_000, help: 'ttl' },
  { name: 'cache', kind: 'size', default: 0, help: 'size' },
  { name: 'strategy', kind: 'enum', values: ['random', 'free_ratio_first'], default: 'random', help: 'strategy' },
  { name: 'address', kind: 'string', default: '0.0.0.0', help: 'addr' },
];
const table = new FlagTable('prog', specs);
const noFile = (): string => {
  throw new Error('ENOENT: no such file');
};

function errorOf(fn: () => unknown): FlagError {
  try {
    fn();
  } catch (e) {
    if (e instanceof FlagError) return e;
    throw e;
  }
  throw new Error('expected a FlagError');
}

describe('FlagTable.parse', () => {
  it('gives defaults when nothing is set', () => {
    const { values, explicit } = table.parse([]);
    expect(values).toMatchObject({ port: 50051, enable_ha: false, tcp_no_delay: true, ratio: 0.05, lease_ttl: 5000, client_ttl: 10_000, strategy: 'random' });
    expect(explicit.size).toBe(0);
  });

  it('accepts --name=value, --name value, bare booleans, --flag=false, single dash and --noflag', () => {
    const { values, explicit } = table.parse(['--port=1', '--address', '127.0.0.1', '--enable_ha', '--tcp_no_delay=false', '-ratio=0.5']);
    expect(values).toMatchObject({ port: 1, address: '127.0.0.1', enable_ha: true, tcp_no_delay: false, ratio: 0.5 });
    expect([...explicit].sort()).toEqual(['address', 'enable_ha', 'port', 'ratio', 'tcp_no_delay']);
    expect(table.parse(['--notcp_no_delay']).values.tcp_no_delay).toBe(false);
  });

  it('treats dashes and underscores alike (--enable-ha)', () => {
    expect(table.parse(['--enable-ha']).values.enable_ha).toBe(true);
    expect(table.parse(['--enable-ha=true']).values.enable_ha).toBe(true);
  });

  it('parses durations in the flag unit and sizes', () => {
    const { values } = table.parse(['--lease_ttl=5s', '--client_ttl=30', '--cache=4gb']);
    expect(values).toMatchObject({ lease_ttl: 5000, client_ttl: 30_000, cache: 4 * 1024 ** 3 });
    expect(table.parse(['--lease_ttl=250']).values.lease_ttl).toBe(250);
  });

  it('names the flag on unknown or malformed input', () => {
    expect(errorOf(() => table.parse(['--bogus=1'])).flag).toBe('--bogus');
    expect(errorOf(() => table.parse(['--port=abc'])).message).toMatch(/--port.*integer/);
    expect(errorOf(() => table.parse(['--port=70000'])).message).toMatch(/--port.*<= 65535/);
    expect(errorOf(() => table.parse(['--ratio=2'])).message).toMatch(/--ratio/);
    expect(errorOf(() => table.parse(['--enable_ha=maybe'])).message).toMatch(/--enable_ha.*true or false/);
    expect(errorOf(() => table.parse(['--strategy=cxl'])).message).toMatch(/--strategy.*random, free_ratio_first/);
    expect(errorOf(() => table.parse(['--lease_ttl=soon'])).message).toMatch(/--lease_ttl/);
    expect(errorOf(() => table.parse(['--address'])).message).toMatch(/--address needs a value/);
    expect(errorOf(() => table.parse(['positional'])).message).toMatch(/unexpected argument/);
  });

  it('raises HelpRequested with a usage listing every flag', () => {
    try {
      table.parse(['--help']);
      throw new Error('no help');
    } catch (e) {
      expect(e).toBeInstanceOf(HelpRequested);
      for (const s of specs) expect((e as HelpRequested).usage).toContain(`--${s.name}`);
    }
  });
});

describe('config files', () => {
  const files: Record<string, string> = {
    '/c.json': JSON.stringify({ port: 6000, enable_ha: true, lease_ttl: '2s', 'client-ttl': 3, strategy: 'free_ratio_first' }),
    '/c.yaml': 'port: 7000\nenable_ha: yes\ncache: 512MB\nratio: 0.25\n',
    '/bad.json': '{"port": ',
    '/unknown.yaml': 'nope: 1\n',
    '/badvalue.yaml': 'port: high\n',
    '/list.yaml': '- 1\n- 2\n',
  };
  const read = (p: string): string => {
    if (!(p in files)) throw new Error(`ENOENT: ${p}`);
    return files[p];
  };

  it('reads JSON and YAML with the same keys and types', () => {
    expect(table.parse(['--config_path=/c.json'], read).values).toMatchObject({ port: 6000, enable_ha: true, lease_ttl: 2000, client_ttl: 3000, strategy: 'free_ratio_first' });
    expect(table.parse(['--config_path', '/c.yaml'], read).values).toMatchObject({ port: 7000, enable_ha: true, cache: 512 * 1024 ** 2, ratio: 0.25 });
  });

  it('lets the command line override the file, wherever --config_path appears', () => {
    expect(table.parse(['--port=1', '--config_path=/c.json'], read).values.port).toBe(1);
    expect(table.parse(['--config_path=/c.json', '--port=2'], read).values.port).toBe(2);
  });

  it('reports unreadable, unparsable, unknown and badly typed content naming the key', () => {
    expect(errorOf(() => table.parse(['--config_path=/missing.json'], noFile)).message).toMatch(/cannot read --config_path/);
    expect(errorOf(() => table.parse(['--config_path=/bad.json'], read)).message).toMatch(/cannot parse --config_path/);
    expect(errorOf(() => table.parse(['--config_path=/unknown.yaml'], read)).message).toMatch(/unknown flag nope/);
    expect(errorOf(() => table.parse(['--config_path=/badvalue.yaml'], read)).message).toMatch(/port \(in \/badvalue.yaml\).*integer/);
    expect(errorOf(() => table.parse(['--config_path=/list.yaml'], read)).message).toMatch(/mapping/);
  });
});
