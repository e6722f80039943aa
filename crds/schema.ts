import {
  AGENT_NAME_CEL,
  AGREEMENT_REF_SCHEMA,
  CLIENT_TEXT_SCHEMA,
  DESCRIPTION_MAX,
  DNS1123_SUBDOMAIN_SCHEMA,
  ISSUER_SCHEMA,
  MAX_PARTNER_AGENTS,
  MAX_PARTNER_GROUPS,
  PARTNER_GROUPS_CEL,
  PROJECT_LABELS,
  RATE_LIMIT,
  RETRIEVAL_TOOL,
  ROOM_ID_SCHEMA,
  SKILLS,
  SYSTEM_MESSAGE_MAX,
} from '../rules/index.ts';
import { GROUP, VERSION } from '../rules/wire.ts';
import { platformSpec } from './platform-schema.ts';
import {
  arr,
  bool,
  CLASSIFICATION_RULES,
  classifications,
  dnsLabel,
  int,
  obj,
  PATTERNS,
  type Schema,
  secretKeyRef,
  str,
} from './schema-kit.ts';

export { PATTERNS } from './schema-kit.ts';

const conditionSchema = obj(
  {
    type: str({ maxLength: 316, description: 'Condition type: Ready, Conflict or Degraded.' }),
    status: str({ enum: ['True', 'False', 'Unknown'], description: 'True, False or Unknown.' }),
    reason: str({
      maxLength: 1024,
      description: 'Machine-readable CamelCase reason, e.g. Rendered, Conflict, McpKeyUnavailable, RegistryTooLarge.',
    }),
    message: str({
      maxLength: 32768,
      description: 'Human-readable detail; never contains secrets or tokens.',
    }),
    observedGeneration: int({
      format: 'int64',
      minimum: 0,
      description: 'metadata.generation of the resource this condition was computed from.',
    }),
    lastTransitionTime: str({
      format: 'date-time',
      description: 'When the status of this condition last changed.',
    }),
  },
  ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
  { description: 'One observation of the resource by the reconciler.' },
);

const statusSchema = obj(
  {
    observedGeneration: int({
      format: 'int64',
      description: 'The metadata.generation the reconciler last processed.',
    }),
    conditions: arr(conditionSchema, {
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      maxItems: 8,
      description: 'Latest observations, one per type (Ready, Conflict, Degraded). Written by the controller only.',
    }),
  },
  [],
  { description: 'State observed by the controller. Read-only for users.' },
);

const READY_COLUMN = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};
const AGE_COLUMN = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

const agentSpec = obj(
  {
    description: str({
      maxLength: DESCRIPTION_MAX,
      description: 'Free-text description copied to the kagent Agent and its A2A AgentCard.',
    }),
    modelConfig: str({
      ...DNS1123_SUBDOMAIN_SCHEMA,
      description: 'Name of the kagent ModelConfig (same namespace) the rendered Agent uses.',
    }),
    systemMessage: str({
      minLength: 1,
      maxLength: SYSTEM_MESSAGE_MAX,
      description: 'System message of the rendered kagent Agent.',
    }),
    skills: arr(
      obj(
        {
          id: str({
            pattern: SKILLS.idPattern,
            description: 'Skill identifier, unique in the list.',
          }),
          name: str({ minLength: 1, maxLength: SKILLS.nameMax, description: 'Display name of the skill.' }),
          description: str({ maxLength: SKILLS.descriptionMax, description: 'What the skill does.' }),
          tags: arr(str({ minLength: 1, maxLength: SKILLS.tagMax }), {
            maxItems: SKILLS.tagsMax,
            'x-kubernetes-list-type': 'set',
            description: 'Keywords for the skill.',
          }),
        },
        ['id', 'name'],
      ),
      {
        maxItems: SKILLS.max,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['id'],
        description: 'A2A AgentCard skills advertised by the rendered Agent (kagent a2aConfig.skills).',
      },
    ),
    mcpApiKeySecretRef: secretKeyRef(
      'Secret in the agent namespace whose key holds "Bearer <MCP API key>" for the retrieval MCP route',
    ),
    rateLimit: obj(
      {
        requestsPerMinute: int({
          minimum: RATE_LIMIT.min,
          maximum: RATE_LIMIT.max,
          default: RATE_LIMIT.default,
          description: 'MCP requests per minute; one tool call is several requests (initialize, list, call).',
        }),
      },
      [],
      {
        default: { requestsPerMinute: RATE_LIMIT.default },
        description: "Local rate limit of this Agent's MCP route on the gateway (one bucket per Agent).",
      },
    ),
    public: bool({
      default: false,
      description:
        "Render a public JWT route for the PartnerClients bound to this Agent (needs the platform's jwt and publicListener).",
    }),
  },
  ['modelConfig', 'systemMessage', 'mcpApiKeySecretRef'],
  { description: 'Desired state of the retrieval Agent.' },
);

const roomSpec = obj(
  {
    roomId: str({
      ...ROOM_ID_SCHEMA,
      'x-kubernetes-validations': ROOM_ID_SCHEMA['x-kubernetes-validations'].map((r) => ({ ...r })),
      description: 'Exact Matrix room ID (legacy !opaque:server or room version 12 form); the registry key.',
    }),
    allowedClassifications: classifications(),
    agreementRef: str({
      ...AGREEMENT_REF_SCHEMA,
      description:
        'Reference to the room agreement that approves approved_non_public; required with it, forbidden otherwise.',
    }),
    description: str({ maxLength: 1024, description: 'Free-text note for operators; not rendered.' }),
  },
  ['roomId'],
  {
    'x-kubernetes-validations': CLASSIFICATION_RULES,
    description: 'Desired state of the room registry entry.',
  },
);

const partnerSpec = obj(
  {
    issuer: str({
      ...ISSUER_SCHEMA,
      description: "JWT issuer (https URL); must equal the platform's jwt.issuer for a public route.",
    }),
    audience: str({
      ...CLIENT_TEXT_SCHEMA,
      description: 'JWT audience the partner presents (printable ASCII without spaces).',
    }),
    azp: str({
      ...CLIENT_TEXT_SCHEMA,
      description: 'JWT authorized party, the OAuth client ID (printable ASCII without spaces).',
    }),
    policyId: dnsLabel('Partner policy ID carried in the projection; the prefix of every group.'),
    groups: arr(str({ pattern: PATTERNS.partnerGroup, maxLength: 255 }), {
      minItems: 1,
      maxItems: MAX_PARTNER_GROUPS,
      'x-kubernetes-list-type': 'set',
      description:
        'Groups projected for this partner, each partner/<policyId>/<group>; a chunk needs one of them in allowed_groups.',
    }),
    allowedClassifications: classifications(),
    agreementRef: str({
      ...AGREEMENT_REF_SCHEMA,
      description:
        'Reference to the onboarding agreement that approves approved_non_public; required with it, forbidden otherwise.',
    }),
    agents: arr(
      obj(
        {
          namespace: dnsLabel('Namespace of the RetrievalAgent.'),
          name: dnsLabel('Name of the RetrievalAgent.'),
        },
        ['namespace', 'name'],
      ),
      {
        maxItems: MAX_PARTNER_AGENTS,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['namespace', 'name'],
        description: 'RetrievalAgents this partner may call over their public route.',
      },
    ),
  },
  ['issuer', 'audience', 'azp', 'policyId', 'groups'],
  {
    description: 'Desired state of the OAuth registry entry, keyed by (issuer, audience, azp).',
    'x-kubernetes-validations': [...CLASSIFICATION_RULES, { ...PARTNER_GROUPS_CEL }],
  },
);

interface KindDef {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  scope: 'Namespaced' | 'Cluster';
  /** Top-level description: what `kubectl explain <kind>` prints. */
  description: string;
  spec: Schema;
  rootRules?: { rule: string; message: string }[];
  columns: Record<string, unknown>[];
}

const KINDS: KindDef[] = [
  {
    kind: 'RetrievalAgent',
    plural: 'retrievalagents',
    singular: 'retrievalagent',
    shortNames: ['ragent'],
    scope: 'Namespaced',
    description: `A retrieval Agent: the reconciler renders a kagent Agent of the same namespace and name with the ${RETRIEVAL_TOOL} tool, its gateway routes and policies, and its NetworkPolicy.`,
    spec: agentSpec,
    rootRules: [{ ...AGENT_NAME_CEL }],
    columns: [
      { name: 'Model', type: 'string', jsonPath: '.spec.modelConfig' },
      { name: 'Public', type: 'boolean', jsonPath: '.spec.public' },
      READY_COLUMN,
      AGE_COLUMN,
    ],
  },
  {
    kind: 'RetrievalRoom',
    plural: 'retrievalrooms',
    singular: 'retrievalroom',
    shortNames: ['rroom'],
    scope: 'Cluster',
    description:
      'One entry of the Matrix room registry: the classification ceiling of an exact room ID. Rooms without an entry are denied.',
    spec: roomSpec,
    columns: [
      { name: 'Room', type: 'string', jsonPath: '.spec.roomId' },
      { name: 'Classifications', type: 'string', jsonPath: '.spec.allowedClassifications' },
      READY_COLUMN,
      AGE_COLUMN,
    ],
  },
  {
    kind: 'PartnerClient',
    plural: 'partnerclients',
    singular: 'partnerclient',
    shortNames: ['pclient'],
    scope: 'Cluster',
    description:
      'One entry of the OAuth partner registry: a JWT client (issuer, audience, azp), its groups, classification ceiling and the Agents it may call.',
    spec: partnerSpec,
    columns: [
      { name: 'Issuer', type: 'string', jsonPath: '.spec.issuer' },
      { name: 'Azp', type: 'string', jsonPath: '.spec.azp' },
      { name: 'Policy', type: 'string', jsonPath: '.spec.policyId' },
      READY_COLUMN,
      AGE_COLUMN,
    ],
  },
  {
    kind: 'RetrievalPlatform',
    plural: 'retrievalplatforms',
    singular: 'retrievalplatform',
    shortNames: ['rplatform'],
    scope: 'Cluster',
    description:
      'The settings shared by every retrieval Agent: gateway, namespaces, Matrix bridge, JWT, services, embeddings. Exactly one, named default.',
    spec: platformSpec,
    rootRules: [{ rule: "self.metadata.name == 'default'", message: 'the RetrievalPlatform must be named default' }],
    columns: [
      { name: 'Gateway', type: 'string', jsonPath: '.spec.gateway.name' },
      { name: 'Backend', type: 'string', jsonPath: '.spec.a2aBackend' },
      READY_COLUMN,
      AGE_COLUMN,
    ],
  },
];

export function kindInfo(kind: string): { plural: string; scope: 'Namespaced' | 'Cluster' } | undefined {
  const k = KINDS.find((d) => d.kind === kind);
  return k && { plural: k.plural, scope: k.scope };
}

export function crdFor(def: KindDef): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${GROUP}`,
      labels: { ...PROJECT_LABELS },
    },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: ['fgentic'],
      },
      scope: def.scope,
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: def.description,
              required: ['spec'],
              properties: {
                apiVersion: str({ description: `API version of this object: ${GROUP}/${VERSION}.` }),
                kind: str({ description: `Kind of this object: ${def.kind}.` }),
                metadata: { type: 'object', description: 'Standard Kubernetes object metadata.' },
                spec: def.spec,
                status: statusSchema,
              },
              ...(def.rootRules ? { 'x-kubernetes-validations': def.rootRules } : {}),
            },
          },
        },
      ],
    },
  };
}

export function allCrds(): Record<string, unknown>[] {
  return KINDS.map(crdFor);
}

export function crdFileName(crd: Record<string, unknown>): string {
  return `${(crd.metadata as { name: string }).name}.yaml`;
}
