/**
 * The JWT issuer of a PartnerClient and of the platform's public listener. The gateway compares it
 * with the token's `iss` exactly, and the projection carries it in `client.issuer`, which the contract
 * accepts only as printable ASCII without spaces of at most 512 bytes (`contract/projection.ts`
 * `checkClient`, docs/decisions.md#adr-oauth-rules). So the rule is: `https://`, a host without `/ ? # @`, an
 * optional path without `? #`, every character printable ASCII other than space, at most 512.
 */
import { type Problem, problem } from './result.ts';

export const ISSUER_MAX = 512;

const HOST = '[\\x21\\x22\\x24-\\x2e\\x30-\\x3e\\x41-\\x7e]'; // printable, not # / ? @
const PATH = '[\\x21\\x22\\x24-\\x3e\\x40-\\x7e]'; // printable, not # ?

/** The pattern of the CRD fields, and the one this module tests with. */
export const ISSUER_PATTERN = `^https://${HOST}+(/${PATH}*)?$`;
const ISSUER = new RegExp(ISSUER_PATTERN);

export function isIssuer(v: unknown): v is string {
  return typeof v === 'string' && v.length <= ISSUER_MAX && ISSUER.test(v);
}

export function checkIssuer(v: unknown, path: string): Problem[] {
  return isIssuer(v)
    ? []
    : [
        problem(
          'issuer',
          path,
          `must be an https URL of at most ${ISSUER_MAX} printable ASCII characters without spaces`,
        ),
      ];
}

export const ISSUER_SCHEMA = { pattern: ISSUER_PATTERN, maxLength: ISSUER_MAX } as const;
