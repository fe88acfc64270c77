// One page of a listing: the `limit` smallest items after a cursor, picked from items offered in
// any order (the object table has no order of its own), in memory for at most 2 x (limit + 1) of
// them. Pure: the HTTP layer offers the items in bounded steps (http-listing.ts).

/** Items ordered as JavaScript compares strings (by UTF-16 code units). */
export class PageCollector {
  private buf: string[] = [];
  /** The largest item still kept once the buffer has been cut; larger ones cannot be on the page. */
  private cut: string | undefined;

  constructor(
    /** Only items greater than this are on the page; undefined: from the first. */
    private readonly after: string | undefined,
    private readonly limit: number,
  ) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`page limit must be a positive integer, got ${limit}`);
  }

  offer(item: string): void {
    if (this.after !== undefined && item <= this.after) return;
    if (this.cut !== undefined && item >= this.cut) return;
    this.buf.push(item);
    // keep one more than the page, to know whether more follow
    if (this.buf.length >= 2 * (this.limit + 1)) this.shrink();
  }

  /** The page in order, without repeats (an item seen twice in a changing table), and whether items follow it. */
  result(): { items: string[]; more: boolean } {
    this.shrink();
    return { items: this.buf.slice(0, this.limit), more: this.buf.length > this.limit };
  }

  private shrink(): void {
    const sorted = this.buf.sort();
    let n = 0;
    for (let i = 0; i < sorted.length && n <= this.limit; i++) if (n === 0 || sorted[i] !== sorted[n - 1]) sorted[n++] = sorted[i]!;
    sorted.length = n;
    if (n === this.limit + 1) this.cut = sorted[n - 1];
  }
}
