// The published package: an application that installs kvcache-store imports { Client } from it.
// Node resolves a package's own name through its "exports" map (self-reference), with the same
// rules as for an installed dependency, so this checks the map against the compiled output.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

describe('the kvcache-store package', () => {
  it("exports Client and the error codes under the package's name", () => {
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      const m = await import('kvcache-store');
      console.log(JSON.stringify({ client: typeof m.Client, setup: typeof m.Client.setup, ok: m.ErrorCode.OK }));
    `,
      ],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(out)).toEqual({ client: 'function', setup: 'function', ok: 0 });
  });

  /** Packages `entry` reaches through its imports, followed through the project's own compiled files. */
  function packagesReached(entry: string, dynamic: boolean): { files: number; packages: Set<string> } {
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const src = readFileSync(file, 'utf8');
      for (const m of src.matchAll(/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s*['"]([^'"]+)['"]/gm)) {
        if (m[2] !== undefined && !dynamic) continue;
        const spec = m[1] ?? m[2] ?? m[3];
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          if (existsSync(target)) visit(target);
        } else packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    };
    visit(entry);
    return { files: seen.size, packages };
  }
  const optional = (): Set<string> => new Set(Object.keys(JSON.parse(readFileSync('package.json', 'utf8')).optionalDependencies ?? {}));

  it("the client library reaches none of the operator's optional dependencies (an application may omit them), but for @kubernetes/client-node on use of k8s://", () => {
    expect(optional()).toEqual(new Set(['@kubernetes/client-node', '@marcbachmann/cel-js', 'json-merge-patch', 'rfc6902']));
    const { files, packages } = packagesReached(join('dist', 'client', 'index.js'), false);
    expect(files).toBeGreaterThan(20);
    expect([...packages].filter((p) => optional().has(p))).toEqual([]);
    // Imported on use: only a k8s:// master address reads the Lease (client/k8s-leader-reader.ts;
    // without the package, setup fails with INVALID_PARAMS naming it).
    const dynamic = packagesReached(join('dist', 'client', 'index.js'), true).packages;
    expect([...dynamic].filter((p) => optional().has(p))).toEqual(['@kubernetes/client-node']);
  });

  it('the binaries load the optional dependencies only on use (store_master on k8s HA, store-operator)', () => {
    for (const bin of ['master/main.js', 'sidecar/main.js', 'cli/main.js', 'operator/main.js']) {
      const { packages } = packagesReached(join('dist', bin), false);
      expect({ bin, optional: [...packages].filter((p) => optional().has(p)) }).toEqual({ bin, optional: [] });
    }
  });

  it('ships every file its binaries and the addon need', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    for (const bin of Object.values<string>(pkg.bin)) {
      expect(pkg.files.some((f: string) => bin.startsWith(f))).toBe(true);
    }
    expect(pkg.files).toEqual(expect.arrayContaining(['native/binding.gyp', 'native/src', 'proto/*.proto']));
  });
});
