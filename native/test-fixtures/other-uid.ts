// A uid of no one for tests that run a process as another user (under setpriv): set when the test
// runs as root and setpriv is there, else `cannotSwitchUid` says what is missing (the test is then
// skipped with that reason).
import { execFileSync } from 'node:child_process';

export const strangerUid = 100_000 + Math.floor(Math.random() * 900_000);

/** setpriv's arguments that run the rest of a command as `strangerUid`. */
export const asStranger = ['setpriv', `--reuid=${strangerUid}`, `--regid=${strangerUid}`, '--clear-groups'];

/** '' when a process can be run as `strangerUid`, else what it needs (for a skip reason). */
export const cannotSwitchUid = ((): string => {
  if (process.getuid?.() !== 0) return 'the test runs as root (it runs a process as another uid)';
  try {
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'setpriv (util-linux) is installed';
  }
  return '';
})();
