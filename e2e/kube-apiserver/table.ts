// Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for, with the Name
// column, a type's printer columns (a CRD's additionalPrinterColumns, evaluated by JSONPath)
// and Age. Date columns are rendered as human durations, as the real server does.

import { evalJsonPath } from './json-path.js';
import type { PrinterColumn, ResourceType } from './resource-registry.js';

type Obj = Record<string, any>;

/** Go's duration.HumanDuration, the short ages kubectl shows ("45s", "3m12s", "5h", "2d3h"). */
export function humanDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 365 * 2) return `${d}d`;
  const y = Math.floor(d / 365);
  if (y < 8) return d % 365 === 0 ? `${y}y` : `${y}y${d % 365}d`;
  return `${y}y`;
}

function columnsOf(t: ResourceType): PrinterColumn[] {
  const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
  if (t.custom) return t.printerColumns.length > 0 ? t.printerColumns : [age];
  if (t.printerColumns.some((c) => c.jsonPath === age.jsonPath)) return t.printerColumns;
  return [...t.printerColumns, age];
}

function cell(col: PrinterColumn, obj: Obj, now: number): unknown {
  let values: unknown[];
  try {
    values = evalJsonPath(col.jsonPath, obj);
  } catch {
    return null;
  }
  if (values.length === 0) return null;
  const v = values.length === 1 ? values[0] : values.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x as string))).join(',');
  if (col.type === 'date' && typeof v === 'string') {
    const t = Date.parse(v);
    return Number.isNaN(t) ? v : humanDuration(now - t);
  }
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return v;
}

/** Converts objects (a get or a list) to a Table; rows carry PartialObjectMetadata like the real server. */
export function toTable(t: ResourceType, objects: Obj[], resourceVersion: string, now: number, continueToken?: string): Obj {
  const cols = columnsOf(t);
  const metadata: Obj = { resourceVersion };
  if (continueToken) metadata.continue = continueToken;
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata,
    columnDefinitions: [
      { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0 },
      ...cols.map((c) => ({ name: c.name, type: c.type, format: c.format ?? '', description: c.description ?? '', priority: c.priority ?? 0 })),
    ],
    rows: objects.map((o) => ({
      cells: [o.metadata.name, ...cols.map((c) => cell(c, o, now))],
      object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}
