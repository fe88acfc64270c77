// Client liveness: when each known client was last heard from (MountSegment or Ping).
export class ClientRegistry {
  private readonly lastSeen = new Map<string, number>();

  get size(): number {
    return this.lastSeen.size;
  }

  has(clientId: string): boolean {
    return this.lastSeen.has(clientId);
  }

  touch(clientId: string, now: number): void {
    this.lastSeen.set(clientId, now);
  }

  delete(clientId: string): void {
    this.lastSeen.delete(clientId);
  }

  /** Clients silent for more than ttl ms. */
  silent(now: number, ttl: number): string[] {
    const out: string[] = [];
    for (const [id, seen] of this.lastSeen) if (now - seen > ttl) out.push(id);
    return out;
  }
}
