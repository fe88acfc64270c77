// The command line of `store`: commands found among options, typed values, usage errors (exit 2)
// and help texts.
import { parseCommandLine, sizeArg, intArg, durationMs, COMMANDS } from './args.js';
import { HelpShown, UsageError, ExitCode, exitCodeOf } from './cli-errors.js';

function usage(argv: string[]): string {
  try {
    parseCommandLine(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    expect(exitCodeOf(e)).toBe(ExitCode.USAGE);
    return (e as Error).message;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('parseCommandLine', () => {
  it('finds the command after options that take a value', () => {
    const inv = parseCommandLine(['--master', '10.0.0.1:50051', 'put', 'k', '-', '--replicas', '2', '--json']);
    expect(inv).toMatchObject({ command: 'put', args: ['k', '-'], options: { replicas: '2' }, global: { master: '10.0.0.1:50051', json: true, quiet: false, timeoutMs: 10_000 } });
  });

  it('takes --name=value, short options and a timeout duration', () => {
    const inv = parseCommandLine(['get', 'k', 'out.bin', '--master-http=http://h:9003', '-q', '--timeout', '2s']);
    expect(inv.global).toMatchObject({ masterHttp: 'http://h:9003', quiet: true, timeoutMs: 2000 });
    expect(inv.args).toEqual(['k', 'out.bin']);
  });

  it('keeps - and arguments after -- as positionals', () => {
    expect(parseCommandLine(['put', '--', '-k', '-']).args).toEqual(['-k', '-']);
  });

  it('refuses unknown commands and options, missing and extra arguments, bad values', () => {
    expect(usage(['frobnicate'])).toMatch(/unknown command "frobnicate"/);
    expect(usage(['ls', '--bogus'])).toMatch(/bogus/);
    expect(usage(['put', 'k'])).toMatch(/missing argument: store put KEY FILE\|-/);
    expect(usage(['rm', 'a', 'b'])).toMatch(/too many arguments/);
    expect(usage(['segments', '--timeout', 'soon'])).toMatch(/--timeout soon/);
    expect(usage(['--json'])).toMatch(/no command given/);
    expect(usage(['rm', 'k', '--replicas', '2'])).toMatch(/replicas/); // an option of another command
  });

  it('answers --help with the tool help or the command help', () => {
    const help = (argv: string[]): string => {
      try {
        parseCommandLine(argv);
      } catch (e) {
        if (e instanceof HelpShown) return e.text;
      }
      throw new Error('no help');
    };
    expect(help([])).toMatch(/^Usage: store COMMAND/);
    expect(help(['--help'])).toMatch(/Exit codes: 0 ok, 1 not found, 2 usage, 3 unreachable, 4 other store error, 5 local file error/);
    for (const c of COMMANDS) expect(help([c.name, '--help'])).toContain(`Usage: store ${c.name}`);
    expect(help(['put', '-h'])).toMatch(/--replicas N/);
  });
});

describe('value parsing', () => {
  it('sizes, whole numbers and durations within bounds', () => {
    expect(sizeArg('SIZE', '4GB', 1)).toBe(4 * 2 ** 30);
    expect(() => sizeArg('SIZE', '0', 1)).toThrow(/between 1/);
    expect(() => sizeArg('SIZE', 'lots', 1)).toThrow(UsageError);
    expect(intArg('--replicas', '3', 1, 64)).toBe(3);
    expect(() => intArg('--replicas', '0', 1, 64)).toThrow(/between 1 and 64/);
    expect(() => intArg('--replicas', '1.5', 1, 64)).toThrow(/whole number/);
    expect(durationMs('--interval', '250ms', 100)).toBe(250);
    expect(durationMs('--interval', '2', 100)).toBe(2000);
    expect(() => durationMs('--interval', '10ms', 100)).toThrow(/at least 100 ms/);
  });
});
