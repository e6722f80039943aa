/**
 * Route dispatch over the two pure decisions. Pure: never throws (anything unexpected is `internal`,
 * carrying the error's class and code for the log; common/error-fields.ts).
 */
import { type ErrorFields, errorFields } from '../common/error-fields.ts';
import type { ProjectorConfig } from './config.ts';
import { decideMatrix, type MatrixDecision } from './matrix.ts';
import { decideOAuth, type OAuthDecision } from './oauth.ts';
import type { DenyReason } from './reasons.ts';
import { CHECK, type CheckRequest, type RouteName } from './request.ts';

export type Decision =
  | ({ readonly route: 'local' } & MatrixDecision)
  | ({ readonly route: 'public' } & OAuthDecision)
  | {
      readonly route: 'unknown';
      readonly allow: false;
      readonly reason: DenyReason;
      /** For `internal`: what was thrown (class and code only). */
      readonly error?: ErrorFields;
    };

export interface DecideOptions {
  readonly now: number;
  readonly randomBytes: (n: number) => Uint8Array;
}

/** The route comes from the rendered literal header; the chosen module re-checks it and everything else. */
export function routeOf(req: CheckRequest): RouteName | undefined {
  const v = req.headers[CHECK.route];
  if (v === undefined || v.length !== 1) return undefined;
  return v[0] === 'local' || v[0] === 'public' ? v[0] : undefined;
}

export function decide(req: CheckRequest, config: ProjectorConfig | undefined, options: DecideOptions): Decision {
  try {
    if (config === undefined) return { route: 'unknown', allow: false, reason: 'config' };
    const route = routeOf(req);
    if (route === 'local') return { route, ...decideMatrix(req, config, options) };
    if (route === 'public') return { route, ...decideOAuth(req, config, options) };
    return { route: 'unknown', allow: false, reason: 'route' };
  } catch (e) {
    return { route: 'unknown', allow: false, reason: 'internal', error: errorFields(e) };
  }
}
