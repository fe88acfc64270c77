// The published package: an application that installs kvcache-store imports { Client } from it.
// Node resolves a package's own name through its "exports" map (self-reference), with the same
// rules as for an installed dependency, so this checks the map against the compiled output.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

describe('the kvcache-store package', () => {
  it("exports Client and the error codes under the package's name", () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
      const m = await import('kvcache-store');
      console.log(JSON.stringify({ client: typeof m.Client, setup: typeof m.Client.setup, ok: m.ErrorCode.OK }));
    `], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ client: 'function', setup: 'function', ok: 0 });
  });

  it("the client library reaches none of the operator's optional dependencies (an application may omit them)", () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    const optional = new Set(Object.keys(pkg.optionalDependencies ?? {}));
    expect(optional).toEqual(new Set(['@kubernetes/client-node', '@marcbachmann/cel-js', 'json-merge-patch', 'rfc6902']));
    // the compiled client's static and dynamic imports, followed through the project's own files
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const src = readFileSync(file, 'utf8');
      for (const m of src.matchAll(/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s*['"]([^'"]+)['"]/gm)) {
        const spec = m[1] ?? m[2] ?? m[3]!;
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          if (existsSync(target)) visit(target);
        } else packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    };
    visit(join('dist', 'client', 'index.js'));
    expect(seen.size).toBeGreaterThan(20);
    expect([...packages].filter((p) => optional.has(p))).toEqual([]);
  });

  it('ships every file its binaries and the addon need', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    for (const bin of Object.values<string>(pkg.bin)) {
      expect(pkg.files.some((f: string) => bin.startsWith(f))).toBe(true);
    }
    expect(pkg.files).toEqual(expect.arrayContaining(['native/binding.gyp', 'native/src', 'proto/*.proto']));
  });
});
