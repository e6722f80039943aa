/**
 * The four CustomResourceDefinitions of `retrieval.fgentic.dev/v1alpha1`, as data. `crds/*.yaml` is
 * generated from this module (`node --import tsx crds/generate.ts`) and a test keeps them identical.
 */
import { PARTNER_GROUP } from '../contract/index.ts';
import {
  A2A_BACKENDS,
  AGENT_NAME_CEL,
  AGREEMENT_REF_SCHEMA,
  BRIDGE_REGEX_SCHEMA,
  CEILING_CEL,
  CEILING_SCHEMA,
  CLIENT_TEXT_SCHEMA,
  DESCRIPTION_MAX,
  DNS1123_LABEL_PATTERN,
  DNS1123_SUBDOMAIN_SCHEMA,
  httpUrlSchema,
  IDENTITY_HEADER_NAME,
  ISSUER_PATTERN,
  ISSUER_SCHEMA,
  LABEL_MAP_SCHEMA,
  LOCAL_GROUP_MAX,
  LOCAL_GROUP_PATTERN,
  LOCAL_GROUPS_CEL,
  MAX_BRIDGED_ORIGINS,
  MAX_LOCAL_GROUPS,
  MAX_OBSERVABILITY_PORTS,
  MAX_PARTNER_AGENTS,
  MAX_PARTNER_GROUPS,
  MCP_URL_MAX,
  MODEL_SCHEMA,
  MXID_PATTERN,
  PARTNER_GROUPS_CEL,
  PORT_SCHEMA,
  PROFILE_CEL,
  PROFILE_SCHEMA,
  PROJECT_LABELS,
  PUBLIC_TIMEOUT_CEL,
  PUBLIC_TIMEOUT_SCHEMA,
  RATE_LIMIT,
  RETRIEVAL_TOOL,
  ROOM_ID_PATTERN,
  ROOM_ID_SCHEMA,
  SECRET_KEY_SCHEMA,
  SERVER_NAME_PATTERN,
  SERVER_NAME_SCHEMA,
  SERVICE_URL_SCHEMA,
  SKILLS,
  SYSTEM_MESSAGE_MAX,
} from '../rules/index.ts';
import {
  CAPABILITY_MODES,
  DEFAULT_CAPABILITY,
  LEDGER_MINT_WINDOW,
  LEDGER_RECORD_DEADLINE,
  LEDGER_TIMING_CEL,
} from '../rules/ledger.ts';
import { GROUP, VERSION } from './types.ts';

type Schema = Record<string, unknown>;

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

const str = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
const int = (extra: Schema = {}): Schema => ({ type: 'integer', ...extra });
const bool = (extra: Schema = {}): Schema => ({ type: 'boolean', ...extra });
const obj = (properties: Record<string, Schema>, required: string[] = [], extra: Schema = {}): Schema => ({
  type: 'object',
  properties,
  ...(required.length ? { required } : {}),
  ...extra,
});
const arr = (items: Schema, extra: Schema = {}): Schema => ({ type: 'array', items, ...extra });
const labels = (description: string): Schema => ({ ...structuredClone(LABEL_MAP_SCHEMA), description });
const url = (maxLength: number, description: string): Schema =>
  str({ ...structuredClone(httpUrlSchema(maxLength)), description });
const port = (description: string): Schema => int({ ...PORT_SCHEMA, description });

const dnsLabel = (description: string) => str({ pattern: PATTERNS.dns1123Label, maxLength: 63, description });
const secretKeyRef = (description: string) =>
  obj(
    {
      name: str({ ...DNS1123_SUBDOMAIN_SCHEMA, description: 'Name of the Secret.' }),
      key: str({ ...SECRET_KEY_SCHEMA, description: 'Key inside the Secret.' }),
    },
    ['name', 'key'],
    { description },
  );

const classifications = (): Schema =>
  arr(str({ enum: [...CEILING_SCHEMA.items.enum] }), {
    description:
      'Classification ceiling: the chunk classifications a caller of this entry may read. Exactly ["public"] (default) or ["approved_non_public","public"]; approved_non_public needs agreementRef.',
    default: [...CEILING_SCHEMA.default],
    minItems: CEILING_SCHEMA.minItems,
    maxItems: CEILING_SCHEMA.maxItems,
    'x-kubernetes-list-type': 'atomic',
  });

const CLASSIFICATION_RULES = CEILING_CEL.map((r) => ({ ...r }));

const conditionSchema = obj(
  {
    type: str({ maxLength: 316, description: 'Condition type: Ready, Conflict or Degraded.' }),
    status: str({ enum: ['True', 'False', 'Unknown'], description: 'True, False or Unknown.' }),
    reason: str({
      maxLength: 1024,
      description:
        'Machine-readable CamelCase reason, e.g. Rendered, Conflict, McpKeyUnavailable, RegistryTooLarge.',
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
      description:
        'Latest observations, one per type (Ready, Conflict, Degraded). Written by the controller only.',
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

const listenerName = (description: string) => dnsLabel(description);
const platformSpec = obj(
  {
    gateway: obj(
      {
        name: dnsLabel('Name of the Gateway (Gateway API) run by agentgateway.'),
        namespace: dnsLabel('Namespace of the Gateway.'),
        localListener: listenerName('Listener of the local A2A routes used by the Matrix bridge.'),
        publicListener: listenerName('Listener of the public JWT routes for partners; required with jwt.'),
        mcpListener: str({
          pattern: PATTERNS.dns1123Label,
          maxLength: 63,
          description: `Listener of the MCP route (default: localListener). Client-sent ${IDENTITY_HEADER_NAME} is stripped before routing on every A2A listener that is not also the MCP listener.`,
        }),
        mcpUrl: url(
          MCP_URL_MAX,
          'Base URL of the proxy for the RemoteMCPServer (default http://<name>.<namespace>.svc.cluster.local:8080)',
        ),
        proxyPodLabels: labels(
          'Pod labels of the agentgateway proxy, used in NetworkPolicies (default app.kubernetes.io/name: agentgateway-proxy).',
        ),
      },
      ['name', 'namespace', 'localListener'],
      { description: 'The agentgateway Gateway every route is attached to.' },
    ),
    namespaces: obj(
      {
        retrieval: dnsLabel('Namespace of the projector, the retrieval server and their ConfigMaps.'),
        kagent: dnsLabel('Namespace where kagent runs (its controller Service).'),
        gateway: dnsLabel('Namespace of the agentgateway proxy and the rendered gateway policy.'),
      },
      ['retrieval', 'kagent', 'gateway'],
      { description: 'Namespaces the rendered objects go to.' },
    ),
    bridge: obj(
      {
        workload: dnsLabel(
          'Workload name in the API key metadata of the Matrix bridge (e.g. matrix-a2a-bridge).',
        ),
        apiKeySecretRef: secretKeyRef('API-key Secret (gateway namespace) of the bridge workload'),
        localServer: str({
          ...SERVER_NAME_SCHEMA,
          'x-kubernetes-validations': SERVER_NAME_SCHEMA['x-kubernetes-validations'].map((r) => ({ ...r })),
          description: 'Matrix server name of the local homeserver.',
        }),
        serviceUserRegex: str({
          ...structuredClone(BRIDGE_REGEX_SCHEMA),
          description:
            "Anchored regex (^...$, printable ASCII, no backreferences, lookaround or nested quantifiers) of the bridge's own service MXIDs; they are never callers nor audience members.",
        }),
        bridgedOrigins: arr(
          obj(
            {
              network: dnsLabel('Name of the bridged network (e.g. slack).'),
              userIdRegex: str({
                ...structuredClone(BRIDGE_REGEX_SCHEMA),
                description:
                  'Anchored regex (^...$, same rule as serviceUserRegex) of the puppet MXIDs of that network.',
              }),
            },
            ['network', 'userIdRegex'],
          ),
          {
            maxItems: MAX_BRIDGED_ORIGINS,
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['network'],
            description:
              'Bridged networks whose puppet users are classified as bridged callers, keyed by network.',
          },
        ),
      },
      ['workload', 'apiKeySecretRef', 'localServer', 'serviceUserRegex'],
      { description: 'The Matrix A2A bridge: its gateway identity and how the projector classifies MXIDs.' },
    ),
    localGroups: arr(str({ pattern: PATTERNS.localGroup, maxLength: LOCAL_GROUP_MAX }), {
      maxItems: MAX_LOCAL_GROUPS,
      'x-kubernetes-list-type': 'set',
      description: 'Local group names; none may start with partner/ or equal a PartnerClient group.',
    }),
    publicRetrievalTimeoutSeconds: int({
      minimum: PUBLIC_TIMEOUT_SCHEMA.minimum,
      maximum: PUBLIC_TIMEOUT_SCHEMA.maximum,
      default: PUBLIC_TIMEOUT_SCHEMA.default,
      description: 'Request timeout of the public routes, in seconds (1-60).',
    }),
    jwt: obj(
      {
        issuer: str({
          ...ISSUER_SCHEMA,
          description: 'Issuer (https URL) the gateway accepts on the public listener.',
        }),
        jwksSecretRef: secretKeyRef('Secret (gateway namespace) holding the JWKS JSON'),
        jwksUri: str({
          ...SERVICE_URL_SCHEMA,
          description:
            'In-cluster Service URL of the JWKS, http(s)://<service>.<namespace>.svc[.cluster.local][:port][/path]; exclusive with jwksSecretRef.',
        }),
      },
      ['issuer'],
      {
        description: 'JWT authentication of partners on the public listener; needs gateway.publicListener.',
        'x-kubernetes-validations': [
          {
            rule: 'has(self.jwksSecretRef) != has(self.jwksUri)',
            message: 'exactly one of jwksSecretRef or jwksUri',
          },
        ],
      },
    ),
    projector: obj(
      {
        service: dnsLabel('Service name of the projector (default fgentic-projector).'),
        port: port('Service port of the projector (default 8080).'),
      },
      [],
      { description: 'The projector (ext-auth) Service in the retrieval namespace.' },
    ),
    retrieval: obj(
      {
        service: dnsLabel('Service name of the retrieval server (default knowledge-retrieval).'),
        port: port('Service port of the retrieval server (default 8080).'),
      },
      [],
      { description: 'The retrieval (MCP) Service in the retrieval namespace.' },
    ),
    embeddings: obj(
      {
        url: url(2048, 'Base URL of the OpenAI-compatible /v1/embeddings endpoint for query embeddings.'),
        model: str({
          ...MODEL_SCHEMA,
          description:
            'Model name sent to the endpoint (e.g. BAAI/bge-m3): printable ASCII, no space at either end.',
        }),
        profile: str({
          ...PROFILE_SCHEMA,
          'x-kubernetes-validations': [{ ...PROFILE_CEL }],
          description:
            'Embedding profile; must equal the one recorded in the database or the server refuses to serve.',
        }),
        tokenSecretRef: secretKeyRef('Secret (retrieval namespace) holding the embeddings listener token'),
      },
      ['url', 'model', 'profile'],
      { description: 'The embeddings endpoint the retrieval server uses for queries.' },
    ),
    a2aBackend: str({
      enum: [...A2A_BACKENDS],
      default: 'controller',
      description:
        "A2A upstream of the routes: controller (kagent controller, A2A 1.0; needs a kagent that forwards the identity header) or agentService (the Agent's Service, A2A 0.3).",
    }),
    capability: str({
      enum: [...CAPABILITY_MODES],
      default: DEFAULT_CAPABILITY,
      description:
        'How the retrieval server trusts a projection: plain (the contract alone) or ledger (only values the projector recorded in the capability ledger; docs/ledger.md).',
    }),
    ledger: obj(
      {
        recordDeadlineMilliseconds: int({
          minimum: LEDGER_RECORD_DEADLINE.min,
          maximum: LEDGER_RECORD_DEADLINE.max,
          default: LEDGER_RECORD_DEADLINE.default,
          description:
            'How long the projector waits for the database to confirm a record before it stops minting until a probe succeeds (ms).',
        }),
        mintWindowMilliseconds: int({
          minimum: LEDGER_MINT_WINDOW.min,
          maximum: LEDGER_MINT_WINDOW.max,
          default: LEDGER_MINT_WINDOW.default,
          description:
            'How long the retrieval server re-checks a value the ledger does not have yet before it denies it (ms).',
        }),
      },
      [],
      {
        description:
          'Timing of the capability ledger, used when capability is ledger (docs/ledger.md); the record deadline must be less than the mint window.',
        'x-kubernetes-validations': [{ ...LEDGER_TIMING_CEL }],
      },
    ),
    liveRoomCheck: obj(
      {
        enabled: bool({
          default: false,
          description: "Let the projector re-read the room's state from the homeserver on every check.",
        }),
        homeserverUrl: url(2048, 'In-cluster URL of the Matrix homeserver client API.'),
        tokenSecretRef: secretKeyRef('Secret (retrieval namespace) with the homeserver access token'),
      },
      [],
      {
        description: 'Optional live check of Matrix room membership by the projector.',
        'x-kubernetes-validations': [
          {
            rule: '!self.enabled || (has(self.homeserverUrl) && has(self.tokenSecretRef))',
            message: 'an enabled live room check needs homeserverUrl and tokenSecretRef',
          },
        ],
      },
    ),
    database: obj(
      {
        namespace: dnsLabel('Namespace of the Postgres pods (default postgres).'),
        podLabels: labels('Pod labels of the Postgres pods (default cnpg.io/cluster: platform-pg).'),
        port: port('Postgres port (default 5432).'),
      },
      [],
      { description: 'Where the retrieval server may connect to Postgres (its egress NetworkPolicy).' },
    ),
    observability: obj(
      {
        namespace: dnsLabel('Namespace of the telemetry collector (default monitoring).'),
        podLabels: labels(
          'Pod labels of the telemetry collector (default: the OpenTelemetry collector labels).',
        ),
        ports: arr(int({ ...PORT_SCHEMA }), {
          maxItems: MAX_OBSERVABILITY_PORTS,
          'x-kubernetes-list-type': 'set',
          description: 'Collector ports the workloads may send to (default 4317, 4318).',
        }),
      },
      [],
      { description: 'Where the workloads may send telemetry (their egress NetworkPolicies).' },
    ),
  },
  ['gateway', 'namespaces', 'bridge', 'embeddings'],
  {
    description: 'Desired state of the platform.',
    'x-kubernetes-validations': [
      { ...PUBLIC_TIMEOUT_CEL },
      { ...LOCAL_GROUPS_CEL },
      {
        rule: '!has(self.jwt) || has(self.gateway.publicListener)',
        message: 'jwt needs gateway.publicListener',
      },
    ],
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
    rootRules: [
      { rule: "self.metadata.name == 'default'", message: 'the RetrievalPlatform must be named default' },
    ],
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
