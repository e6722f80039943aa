/**
 * Building blocks of the CRD schemas (crds/schema.ts): typed schema helpers and the patterns,
 * each taken from the one rule of its family in rules/.
 */
import { PARTNER_GROUP } from '../contract/index.ts';
import {
  CEILING_CEL,
  CEILING_SCHEMA,
  DNS1123_LABEL_PATTERN,
  DNS1123_SUBDOMAIN_SCHEMA,
  httpUrlSchema,
  ISSUER_PATTERN,
  LABEL_MAP_SCHEMA,
  LOCAL_GROUP_PATTERN,
  MXID_PATTERN,
  PORT_SCHEMA,
  ROOM_ID_PATTERN,
  SECRET_KEY_SCHEMA,
  SERVER_NAME_PATTERN,
} from '../rules/index.ts';

export type Schema = Record<string, unknown>;

/** Every pattern comes from rules/ (one rule, one place); the names are kept for the tests. */
export const PATTERNS = {
  dns1123Label: DNS1123_LABEL_PATTERN,
  dns1123Subdomain: DNS1123_SUBDOMAIN_SCHEMA.pattern,
  secretKey: SECRET_KEY_SCHEMA.pattern,
  roomId: ROOM_ID_PATTERN,
  mxid: MXID_PATTERN,
  serverName: SERVER_NAME_PATTERN,
  httpsUrl: ISSUER_PATTERN,
  httpUrl: httpUrlSchema().pattern,
  partnerGroup: PARTNER_GROUP.source,
  localGroup: LOCAL_GROUP_PATTERN,
} as const;

export const str = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
export const int = (extra: Schema = {}): Schema => ({ type: 'integer', ...extra });
export const bool = (extra: Schema = {}): Schema => ({ type: 'boolean', ...extra });
export const obj = (properties: Record<string, Schema>, required: string[] = [], extra: Schema = {}): Schema => ({
  type: 'object',
  properties,
  ...(required.length ? { required } : {}),
  ...extra,
});
export const arr = (items: Schema, extra: Schema = {}): Schema => ({ type: 'array', items, ...extra });
export const labels = (description: string): Schema => ({
  ...structuredClone(LABEL_MAP_SCHEMA),
  description,
});
export const url = (maxLength: number, description: string): Schema =>
  str({ ...structuredClone(httpUrlSchema(maxLength)), description });
export const port = (description: string): Schema => int({ ...PORT_SCHEMA, description });

export const dnsLabel = (description: string) => str({ pattern: PATTERNS.dns1123Label, maxLength: 63, description });
export const secretKeyRef = (description: string) =>
  obj(
    {
      name: str({ ...DNS1123_SUBDOMAIN_SCHEMA, description: 'Name of the Secret.' }),
      key: str({ ...SECRET_KEY_SCHEMA, description: 'Key inside the Secret.' }),
    },
    ['name', 'key'],
    { description },
  );

export const classifications = (): Schema =>
  arr(str({ enum: [...CEILING_SCHEMA.items.enum] }), {
    description:
      'Classification ceiling: the chunk classifications a caller of this entry may read. Exactly ["public"] (default) or ["approved_non_public","public"]; approved_non_public needs agreementRef.',
    default: [...CEILING_SCHEMA.default],
    minItems: CEILING_SCHEMA.minItems,
    maxItems: CEILING_SCHEMA.maxItems,
    'x-kubernetes-list-type': 'atomic',
  });

export const CLASSIFICATION_RULES = CEILING_CEL.map((r) => ({ ...r }));
