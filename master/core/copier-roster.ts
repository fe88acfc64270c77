// The clients that make replica copies for the master (re-replication, tasks, the SSD tier's
// offloads and promotions), as the core sees them: who offered to copy in a Ping and when, and
// which of them were told that copies wait for them (docs/master-channel.md "Notices").
//
// Telling is an effect the core asks for and the process shell carries out (`notify`, set with
// MasterCore.setCopierNotify: a NOTICE frame on the client's channel connection); the core keeps
// no connection, timer or clock for it. A copier is told at most once between two of its offers:
// a burst of puts queueing thousands of offloads sends one notice, and the copier's next Ping
// (which takes the copies) makes it tellable again. A notice that is lost changes nothing but
// the wait: the copier's next heartbeat Ping finds the copies as before.

export class CopierRoster {
  /** Clients that offered to copy, and when they last did. */
  private readonly offered = new Map<string, number>();
  /** Copiers told since their last offer. */
  private readonly told = new Set<string>();
  /** Carries a notice to a copier (the shell's); a no-op until set. */
  private notify: ((clientId: string) => void) | undefined;

  /** Whether notices are sent (the shell set `notify`): Ping replies say so to clients. */
  get pushing(): boolean {
    return this.notify !== undefined;
  }

  setNotify(notify: ((clientId: string) => void) | undefined): void {
    this.notify = notify;
  }

  /** A Ping offering to copy: the copier takes what waits now, so it may be told again. */
  offer(clientId: string, now: number): void {
    this.offered.set(clientId, now);
    this.told.delete(clientId);
  }

  /**
   * Whether `clientId` is a copier that offered within `withinMs` of `now`: true; one that offered
   * longer ago is forgotten (false, as for a client that never offered).
   */
  fresh(clientId: string, now: number, withinMs: number): boolean {
    const last = this.offered.get(clientId);
    if (last === undefined) return false;
    if (last > now - withinMs) return true;
    this.forget(clientId);
    return false;
  }

  /** Whether `clientId` offered to copy (and was not forgotten since). */
  has(clientId: string): boolean {
    return this.offered.has(clientId);
  }

  /** Copies wait for `clientId` (the owner of what is to be copied): tell it, or every copier when it is none. */
  wake(clientId: string | undefined): void {
    if (clientId !== undefined && this.offered.has(clientId)) this.tell(clientId);
    else this.wakeAll();
  }

  /** Copies wait for whoever takes them: tell every copier not told yet. */
  wakeAll(): void {
    if (this.notify === undefined) return;
    for (const clientId of this.offered.keys()) this.tell(clientId);
  }

  /** The client left (dropped as silent): no notice goes to it. */
  forget(clientId: string): void {
    this.offered.delete(clientId);
    this.told.delete(clientId);
  }

  private tell(clientId: string): void {
    const notify = this.notify;
    if (notify === undefined || this.told.has(clientId)) return;
    this.told.add(clientId);
    notify(clientId);
  }
}
