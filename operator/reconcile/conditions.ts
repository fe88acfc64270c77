// Standard status conditions (Ready, Progressing, Degraded): set one, keeping its
// lastTransitionTime unless its status flips, and report whether anything changed so the
// reconciler patches status only on change.

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

export function setConditions(current: Condition[] | undefined, inputs: ConditionInput[], nowIso: string): Condition[] {
  const out = [...(current ?? [])];
  for (const c of inputs) {
    const i = out.findIndex((x) => x.type === c.type);
    const prev = i >= 0 ? out[i] : undefined;
    const next: Condition = { ...c, lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : nowIso };
    if (i >= 0) out[i] = next;
    else out.push(next);
  }
  return out;
}

export function findCondition(conditions: Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
