/**
 * One entry point per kind for the rules of one resource: the admission webhook denies with these
 * problems and the render reports the first as the resource's `Invalid` conflict, so both decide
 * alike. The rules across resources are in cross-object.ts. Pure.
 */
import { isObject as isObj } from '../common/json-read.ts';
import { isRoomId } from '../contract/index.ts';
import { checkAgent } from './agents.ts';
import { checkCeiling } from './classifications.ts';
import { checkClient, checkPartnerAgents, checkPartnerGroups } from './partners.ts';
import { checkPlatform } from './platform.ts';
import { type Problem, problem } from './result.ts';

export { checkAgent, checkPlatform };

export function checkRoom(r: { spec?: unknown }): Problem[] {
  const s = r.spec;
  if (!isObj(s)) return [problem('required', 'spec', 'required')];
  return [
    ...(isRoomId(s['roomId'])
      ? []
      : [problem('room-id', 'spec.roomId', 'not a Matrix room ID (legacy !opaque:server or v12 form)')]),
    ...checkCeiling(s['allowedClassifications'], s['agreementRef']),
  ];
}

export function checkPartner(p: { spec?: unknown }): Problem[] {
  const s = p.spec;
  if (!isObj(s)) return [problem('required', 'spec', 'required')];
  return [
    ...checkClient(s),
    ...checkPartnerGroups(s['groups'], s['policyId'], 'spec.groups'),
    ...checkPartnerAgents(s['agents'], 'spec.agents'),
    ...checkCeiling(s['allowedClassifications'], s['agreementRef']),
  ];
}

export const RESOURCE_CHECKS = {
  RetrievalPlatform: checkPlatform,
  RetrievalAgent: checkAgent,
  RetrievalRoom: checkRoom,
  PartnerClient: checkPartner,
} as const;
