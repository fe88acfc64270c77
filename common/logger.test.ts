import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogLevel, Logger } from './logger.js';

describe('Logger', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'logger-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes glog-style lines to stderr by default, dropping levels below the minimum', () => {
    const lines: string[] = [];
    const log = new Logger({ program: 'p', minLevel: LogLevel.INFO, stderr: (l) => lines.push(l) });
    log.debug('hidden');
    log.info('shown');
    log.error('bad');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^I\d{8} \d\d:\d\d:\d\d\.\d{3} \d+\] shown\n$/);
    expect(lines[1]).toMatch(/^E.* bad\n$/);
  });

  it('with a log dir writes every severity to <program>.INFO.<date>-<time>.<pid> behind a symlink, errors also to stderr', () => {
    const lines: string[] = [];
    const log = new Logger({ program: 'store_master', logDir: dir, stderr: (l) => lines.push(l) });
    log.info('one');
    log.warn('two');
    log.error('three');
    log.close();
    const files = readdirSync(dir).sort();
    expect(files).toHaveLength(2);
    expect(files[0]).toBe('store_master.INFO');
    expect(files[1]).toMatch(new RegExp(`^store_master\\.INFO\\.\\d{8}-\\d{6}\\.${process.pid}$`));
    expect(readlinkSync(join(dir, 'store_master.INFO'))).toBe(files[1]);
    const text = readFileSync(join(dir, 'store_master.INFO'), 'utf8');
    expect(text).toMatch(/^I.*one\nW.*two\nE.*three\n$/);
    expect(lines).toHaveLength(1);
  });

  it('rotates past max_log_size and points the symlink at the new file', () => {
    const log = new Logger({ program: 'p', logDir: dir, maxLogSizeMb: 1, stderr: () => undefined });
    const line = 'x'.repeat(100 * 1024);
    for (let i = 0; i < 12; i++) log.info(line);
    log.close();
    const files = readdirSync(dir)
      .filter((f) => f !== 'p.INFO')
      .sort();
    expect(files.length).toBe(2);
    expect(readlinkSync(join(dir, 'p.INFO'))).toBe(log.file?.split('/').pop());
    expect(readFileSync(join(dir, files[0])).length).toBeLessThanOrEqual(1024 * 1024);
  });

  it('logs to stderr only with logToStderr even when a dir is given', () => {
    const lines: string[] = [];
    const log = new Logger({ program: 'p', logDir: dir, logToStderr: true, stderr: (l) => lines.push(l) });
    log.info('x');
    expect(lines).toHaveLength(1);
    expect(readdirSync(dir)).toHaveLength(0);
  });
});
