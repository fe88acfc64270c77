// The published package: an application that installs kvcache-store imports { Client } from it.
// Node resolves a package's own name through its "exports" map (self-reference), with the same
// rules as for an installed dependency, so this checks the map against the compiled output.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

describe('the kvcache-store package', () => {
  it("exports Client and the error codes under the package's name", () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
      const m = await import('kvcache-store');
      console.log(JSON.stringify({ client: typeof m.Client, setup: typeof m.Client.setup, ok: m.ErrorCode.OK }));
    `], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ client: 'function', setup: 'function', ok: 0 });
  });

  it('ships every file its binaries and the addon need', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    for (const bin of Object.values<string>(pkg.bin)) {
      expect(pkg.files.some((f: string) => bin.startsWith(f))).toBe(true);
    }
    expect(pkg.files).toEqual(expect.arrayContaining(['native/binding.gyp', 'native/src', 'proto/*.proto']));
  });
});
