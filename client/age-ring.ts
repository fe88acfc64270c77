// The age order of a bounded cache: (key, value) pairs in the order they were kept, oldest first,
// in a growable circular buffer. A cache keeps its entries in a Map and this ring beside it, and
// drops its oldest entries (the bound, expiry) from the ring's head, checking that the pair is
// still the key's entry (a key kept again, or dropped, leaves a stale pair behind).
//
// Why not the Map's own order: V8 keeps a deleted entry's place until the table is rebuilt, so
// taking the first key of a Map used as a queue (`map.keys().next()`) walks over every entry
// deleted before it: 12 us per entry kept at 65,536 entries, measured (bench/dummy-hop-bench.ts
// and docs/client.md), against 0.3 us with a ring.
export class AgeRing<V> {
  private keys: (string | undefined)[] = new Array<string | undefined>(16).fill(undefined);
  private values: (V | undefined)[] = new Array<V | undefined>(16).fill(undefined);
  private head = 0;
  private count = 0;

  /** Pairs held (stale ones included). */
  get size(): number {
    return this.count;
  }

  /** Appends a pair at the young end. */
  push(key: string, value: V): void {
    if (this.count === this.keys.length) this.grow();
    const at = (this.head + this.count) % this.keys.length;
    this.keys[at] = key;
    this.values[at] = value;
    this.count++;
  }

  /** The oldest pair's key (undefined when empty). */
  get oldestKey(): string | undefined {
    return this.count > 0 ? this.keys[this.head] : undefined;
  }

  /** The oldest pair's value (undefined when empty). */
  get oldestValue(): V | undefined {
    return this.count > 0 ? this.values[this.head] : undefined;
  }

  /** Removes the oldest pair. */
  shift(): void {
    if (this.count === 0) return;
    this.keys[this.head] = undefined;
    this.values[this.head] = undefined;
    this.head = (this.head + 1) % this.keys.length;
    this.count--;
  }

  clear(): void {
    this.keys.fill(undefined);
    this.values.fill(undefined);
    this.head = this.count = 0;
  }

  private grow(): void {
    const n = this.keys.length;
    const keys = new Array<string | undefined>(2 * n).fill(undefined);
    const values = new Array<V | undefined>(2 * n).fill(undefined);
    for (let i = 0; i < n; i++) {
      keys[i] = this.keys[(this.head + i) % n];
      values[i] = this.values[(this.head + i) % n];
    }
    this.keys = keys;
    this.values = values;
    this.head = 0;
  }
}
