// The keys a batch has put so far, so that a key listed twice in one BatchPutStart is looked up
// again instead of trusting the lookup made for the whole batch before it began. A small
// open-addressing set, reused for every batch: emptying it moves an epoch instead of clearing
// slots. The hash reads the whole key, with a seed: keys sharing a long prefix and suffix (common in KV-cache
// naming, or chosen by a hostile client) would otherwise pile into one probe run. A JavaScript
// Set measured ~40 bytes of garbage per key here (clear() drops its table, and it regrows for
// each batch).

function keyHash(key: string, seed: number): number {
  let h = seed ^ key.length;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1);
  return (h ^ (h >>> 15)) >>> 0;
}

export class BatchKeySet {
  /** Epoch of each slot's entry; a slot whose epoch is not the current one is empty. */
  private epochs = new Int32Array(16);
  private keys: (string | undefined)[] = new Array<string | undefined>(16).fill(undefined);
  private epoch = 1;
  private count = 0;

  /** `seed` varies the hash (a process serving untrusted clients passes a random one). */
  constructor(private readonly seed = 0x6a09e667) {}

  get size(): number {
    return this.count;
  }

  has(key: string): boolean {
    const mask = this.epochs.length - 1;
    for (let i = keyHash(key, this.seed) & mask; this.epochs[i] === this.epoch; i = (i + 1) & mask) if (this.keys[i] === key) return true;
    return false;
  }

  /** Adds key; false when it was there already (one hash for both questions). */
  add(key: string): boolean {
    if ((this.count + 1) * 2 > this.epochs.length) this.grow();
    const mask = this.epochs.length - 1;
    let i = keyHash(key, this.seed) & mask;
    for (; this.epochs[i] === this.epoch; i = (i + 1) & mask) if (this.keys[i] === key) return false;
    this.epochs[i] = this.epoch;
    this.keys[i] = key;
    this.count++;
    return true;
  }

  /** Empties the set; the key strings stay referenced until their slots are reused (at most a batch of them). */
  clear(): void {
    this.count = 0;
    if (++this.epoch === 0x7fffffff) {
      this.epoch = 1;
      this.epochs.fill(0);
    }
  }

  private grow(): void {
    const old = this.keys;
    const oldEpochs = this.epochs;
    const cap = oldEpochs.length * 2;
    this.epochs = new Int32Array(cap);
    this.keys = new Array<string | undefined>(cap).fill(undefined);
    this.count = 0;
    for (let i = 0; i < old.length; i++) if (oldEpochs[i] === this.epoch) this.add(old[i]!);
  }
}
