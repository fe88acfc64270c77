// Kubernetes Events for what the operator does (created, updated, invalid spec), recorded on
// the object they concern. Repeats of the same event within a pass are folded by the API's
// count field; failures to record are logged, never fatal.
import { randomBytes } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { KubeApi } from './kube-client.js';

export interface EventRecorder {
  normal(obj: KubernetesObject, reason: string, message: string): void;
  warning(obj: KubernetesObject, reason: string, message: string): void;
}

export class ApiEventRecorder implements EventRecorder {
  constructor(
    private readonly api: KubeApi,
    private readonly component: string,
    private readonly wallNow: () => string,
    private readonly log: (m: string) => void,
  ) {}

  normal(obj: KubernetesObject, reason: string, message: string): void {
    this.record(obj, 'Normal', reason, message);
  }
  warning(obj: KubernetesObject, reason: string, message: string): void {
    this.record(obj, 'Warning', reason, message);
  }

  private record(obj: KubernetesObject, type: string, reason: string, message: string): void {
    const now = this.wallNow();
    const ns = obj.metadata?.namespace ?? 'default';
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${obj.metadata?.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata?.name,
        namespace: ns,
        uid: obj.metadata?.uid,
        resourceVersion: obj.metadata?.resourceVersion,
      },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: this.component },
      reportingComponent: this.component,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    this.api.create(event).catch((e: Error) => this.log(`event ${reason} on ${ns}/${obj.metadata?.name} not recorded: ${e.message}`));
  }
}

/** Keeps events in memory (the offline CLI and unit tests of the loop). */
export class MemoryEventRecorder implements EventRecorder {
  readonly events: { type: string; object: string; reason: string; message: string }[] = [];
  normal(obj: KubernetesObject, reason: string, message: string): void {
    this.events.push({ type: 'Normal', object: `${obj.kind}/${obj.metadata?.name}`, reason, message });
  }
  warning(obj: KubernetesObject, reason: string, message: string): void {
    this.events.push({ type: 'Warning', object: `${obj.kind}/${obj.metadata?.name}`, reason, message });
  }
}
