// Copy notices on the fast channel (docs/master-channel.md "Notices"), the shell's half of the
// push: the core decides which copier to tell that copies wait for it (master/core/copier-roster.ts,
// MasterCore.setCopierNotify); this finds the channel connection that copier last pinged on with
// `copy_push` and queues a NOTICE frame there (it leaves with the connection's other frames of the
// turn). A copier with no such connection (gRPC, an older client, a connection closed since) gets
// nothing and finds its copies at its next heartbeat Ping, as before.

/** A channel connection that can carry notices (master/channel-server.ts). */
export interface NoticeTarget {
  notice(method: number): void;
}

export class CopierPush {
  private readonly byClient = new Map<string, NoticeTarget>();
  /** Notices queued so far (metrics, tests). */
  sent = 0;

  /** `pingMethod`: the index of Ping in the channel's method table, the notice's method. */
  constructor(readonly pingMethod: number) {}

  /** `clientId` pinged on `conn` asking for notices: later ones go there. */
  bind(clientId: string, conn: NoticeTarget): void {
    this.byClient.set(clientId, conn);
  }

  /** `conn` closed: no notice goes to it. */
  unbind(conn: NoticeTarget): void {
    for (const [clientId, c] of this.byClient) if (c === conn) this.byClient.delete(clientId);
  }

  /** The core's notify: tells `clientId` that copies wait for it, when it has a channel that listens. */
  readonly notify = (clientId: string): void => {
    const conn = this.byClient.get(clientId);
    if (conn === undefined) return;
    this.sent++;
    conn.notice(this.pingMethod);
  };
}
