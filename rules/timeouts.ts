/**
 * The request timeout of the public routes, in whole seconds. The projector caps a partner
 * projection's lifetime by it and the gateway route uses it, so both must read the same bounds.
 */
import { type Problem, problem } from './result.ts';

export const PUBLIC_TIMEOUT = { min: 1, max: 60, default: 30 } as const;

export function isValidTimeoutSetting(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= PUBLIC_TIMEOUT.min && v <= PUBLIC_TIMEOUT.max;
}

/** Absent means the default. */
export function checkPublicTimeout(v: unknown, path: string): Problem[] {
  return v === undefined || isValidTimeoutSetting(v)
    ? []
    : [problem('timeout', path, `must be an integer ${PUBLIC_TIMEOUT.min}-${PUBLIC_TIMEOUT.max}`)];
}

export const PUBLIC_TIMEOUT_SCHEMA = {
  type: 'integer',
  minimum: PUBLIC_TIMEOUT.min,
  maximum: PUBLIC_TIMEOUT.max,
  default: PUBLIC_TIMEOUT.default,
} as const;

export const PUBLIC_TIMEOUT_CEL = {
  rule: `!has(self.publicRetrievalTimeoutSeconds) || (self.publicRetrievalTimeoutSeconds >= ${PUBLIC_TIMEOUT.min} && self.publicRetrievalTimeoutSeconds <= ${PUBLIC_TIMEOUT.max})`,
  message: `publicRetrievalTimeoutSeconds must be within ${PUBLIC_TIMEOUT.min}-${PUBLIC_TIMEOUT.max}`,
} as const;
