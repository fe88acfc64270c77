// The error of a store-operator command that the user can fix (bad flags, bad files): printed as
// one line, exit code 2. Its own module, so the binary can report it before loading anything else.
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}
