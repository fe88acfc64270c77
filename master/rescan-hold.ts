// Reads a new HA leader cannot answer yet (docs/tiers.md "File tier"): while its rescan of the
// file tier's directory runs, the core answers UNAVAILABLE_IN_CURRENT_STATUS for a key it finds
// neither in memory nor in its file index so far (its file may not be scanned yet:
// master/core/read-path.ts). The dispatcher holds such a reply and asks the core again once the
// scan has ended, or HOLD_MS after the call came, whichever is first; past that the caller gets
// UNAVAILABLE_IN_CURRENT_STATUS (retryable), never a false OBJECT_NOT_FOUND. A held call costs a
// timer and a promise; nothing is polled.

/** Longest a read is held for a rescan (below clients' 10 s request timeout). */
export const RESCAN_HOLD_MS = 5_000;

export class RescanHold {
  /** Settles when the rescan in progress ends; undefined when none runs. */
  private scan: Promise<void> | undefined;
  /** Calls held now (a gauge). */
  held = 0;

  constructor(private readonly holdMs = RESCAN_HOLD_MS) {}

  /** A rescan began; `done` settles (either way) when it ends. */
  begin(done: Promise<unknown>): void {
    const scan = done.then(
      () => undefined,
      () => undefined,
    );
    this.scan = scan;
    void scan.then(() => {
      if (this.scan === scan) this.scan = undefined;
    });
  }

  /** Resolves when the rescan ended or holdMs passed; undefined when no rescan runs (nothing to wait for). */
  wait(): Promise<void> | undefined {
    const scan = this.scan;
    if (scan === undefined) return undefined;
    this.held++;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.holdMs);
    });
    return Promise.race([scan, bound]).finally(() => {
      clearTimeout(timer);
      this.held--;
    });
  }
}
