// Replays every testdata/*.txt scenario against MasterCore and compares with its golden output.
// To accept new output after a deliberate behaviour change: REWRITE=1 npm run jest -- core-script
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatScript, parseScript, runScript } from './core-script.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), 'testdata');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.txt'))
  .sort();

describe('master core scripts (testdata/*.txt)', () => {
  it('has scripts to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('%s', (file) => {
    const path = join(dir, file);
    const text = readFileSync(path, 'utf8');
    const actual = formatScript(runScript(parseScript(text)));
    if (process.env['REWRITE'] === '1') writeFileSync(path, actual);
    else expect(actual).toBe(text);
  });
});
