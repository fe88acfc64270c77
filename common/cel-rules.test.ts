// CEL on @marcbachmann/cel-js: the forms CRD rules use, Kubernetes' runtime-error semantics, the
// functions the library lacks reported as unsupported, and every rule in crds/ evaluable.
import { readdirSync, readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { evalExpression, evalRule, isSupportedRule } from './cel-rules.js';

describe('CEL rules', () => {
  test('evaluates the forms CRD rules use', () => {
    const self = { replicas: 3, type: 'etcd', address: 'x:1', tags: ['a', 'b'], m: { k: 'v' } };
    expect(evalRule('self.replicas <= 1 || has(self.haBackend)', self, undefined)).toBe(false);
    expect(evalRule("!(self.type == 'etcd' || self.type == 'redis') || has(self.address)", self, undefined)).toBe(true);
    expect(evalRule('self.tags.all(t, t.size() == 1) && size(self.tags) == 2', self, undefined)).toBe(true);
    expect(evalRule("self.tags.exists(t, t == 'c')", self, undefined)).toBe(false);
    expect(evalRule("'k' in self.m && self.type.startsWith('et') && self.address.matches('^[a-z]+:[0-9]+$')", self, undefined)).toBe(true);
    expect(evalRule('self.replicas % 2 == 1 ? self.replicas > 2 : false', self, undefined)).toBe(true);
    expect(evalRule('self == oldSelf', 1, 1)).toBe(true);
    expect(evalRule('self == oldSelf', 1, 2)).toBe(false);
    expect(evalRule('self.missing > 1', self, undefined)).toBe(false);
    expect(evalRule('self.missing > 1 || true', self, undefined)).toBe(true);
    expect(evalRule("quantity(self.q).isGreaterThan(quantity('1Gi'))", self, undefined)).toBe('skip');
  });

  test('whole JSON numbers are CEL ints, so integer arithmetic and int/double comparisons work', () => {
    expect(evalRule('self.n % 4 == 3 && self.n / 2 == 3 && self.r < 1 && self.n > 6.5', { n: 7, r: 0.5 }, undefined)).toBe(true);
    expect(evalRule('self.r == 0.5 && self.w == 2.0', { r: 0.5, w: 2 }, undefined)).toBe(true);
  });

  test("matchConditions: a runtime error is 'error', an unknown function 'skip', a syntax error 'skip'", () => {
    const object = { metadata: { annotations: { inject: 'yes' } } };
    expect(evalExpression("object.metadata.annotations['inject'] == 'yes'", { object })).toBe(true);
    expect(evalExpression("object.metadata.labels['x'] == 'y'", { object })).toBe('error');
    expect(evalExpression('url(object.metadata.name).getHost() == "a"', { object })).toBe('skip');
    expect(evalExpression('object.metadata.(', { object })).toBe('skip');
    expect(isSupportedRule('self.size() > 1 && self.lowerAscii() == self')).toBe(true);
  });

  test('every x-kubernetes-validations rule in crds/ can be evaluated', () => {
    const dir = new URL('../crds/', import.meta.url);
    const rules: string[] = [];
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          if (k === 'x-kubernetes-validations' && Array.isArray(x)) rules.push(...x.map((r) => String(r.rule)));
          else walk(x);
        }
      }
    };
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.yaml'))) walk(yaml.loadAll(readFileSync(new URL(f, dir), 'utf8')));
    expect(rules.filter((r) => !isSupportedRule(r))).toEqual([]);
  });
});
