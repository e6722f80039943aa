/**
 * Compiles the CEL this component renders (matchConditions, ValidatingAdmissionPolicy) with a real CEL
 * engine, @bufbuild/cel plus the strings extension (the Kubernetes CEL library's lowerAscii/trim/...).
 * Used by the tests to check rendered policy against the webhook's own rules.
 */
import { celEnv, isCelError, parse, plan } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

export type CelOutcome = boolean | 'error' | 'not-bool';

export function compileCel(expression: string): (bindings: Record<string, unknown>) => CelOutcome {
  const fn = plan(celEnv({ funcs: strings }), parse(expression));
  return (bindings) => {
    const out = fn(bindings as never);
    if (isCelError(out)) return 'error';
    return typeof out === 'boolean' ? out : 'not-bool';
  };
}

/** The raw value (for variables, whose results feed later expressions). */
export function compileCelValue(expression: string): (bindings: Record<string, unknown>) => unknown {
  const fn = plan(celEnv({ funcs: strings }), parse(expression));
  return (bindings) => fn(bindings as never);
}
