/**
 * The four CustomResourceDefinitions of `retrieval.fgentic.dev/v1alpha1`, as data. `crds/*.yaml` is
 * generated from this module (`node --import tsx crds/generate.ts`) and a test keeps them identical.
 */
import { PARTNER_GROUP } from '../contract/index.ts';
import { GROUP, VERSION } from './types.ts';

type Schema = Record<string, unknown>;

export const PATTERNS = {
  dns1123Label: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$',
  dns1123Subdomain: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
  secretKey: '^[-._a-zA-Z0-9]+$',
  /** Legacy `!opaque:server` or room-version-12 `!<43 unpadded base64url>`. */
  roomId: '^!([A-Za-z0-9_-]{43}|[!-9;-~]+:([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?)$',
  /** A full Matrix user ID, narrowed like contract/identifiers.ts. */
  mxid: '^@[a-z0-9._=/+-]+:([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?$',
  serverName: '^([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?$',
  httpsUrl: '^https://[^\\s/?#@]+(/[^\\s?#]*)?$',
  httpUrl: '^https?://[^\\s/?#@]+(/[^\\s?#]*)?$',
  partnerGroup: PARTNER_GROUP.source,
  localGroup: '^[a-z0-9]([-a-z0-9._/]{0,126}[a-z0-9])?$',
  anchoredRegex: '^\\^.*\\$$',
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
const labels = (): Schema => ({
  type: 'object',
  additionalProperties: { type: 'string', maxLength: 63 },
  maxProperties: 8,
});

const dnsLabel = () => str({ pattern: PATTERNS.dns1123Label, maxLength: 63 });
const secretKeyRef = (description: string) =>
  obj(
    {
      name: str({ pattern: PATTERNS.dns1123Subdomain, maxLength: 253 }),
      key: str({ pattern: PATTERNS.secretKey, maxLength: 253 }),
    },
    ['name', 'key'],
    { description },
  );

const classifications = (): Schema =>
  arr(str({ enum: ['approved_non_public', 'public'] }), {
    description: 'Classification ceiling: exactly ["public"] (default) or ["approved_non_public","public"].',
    default: ['public'],
    minItems: 1,
    maxItems: 2,
    'x-kubernetes-list-type': 'atomic',
  });

const CLASSIFICATION_RULES = [
  {
    rule: "self.allowedClassifications == ['public'] || self.allowedClassifications == ['approved_non_public', 'public']",
    message: 'allowedClassifications must be exactly ["public"] or ["approved_non_public","public"]',
  },
  {
    rule: "('approved_non_public' in self.allowedClassifications) == has(self.agreementRef)",
    message: 'agreementRef is required with approved_non_public and forbidden otherwise',
  },
];

const conditionSchema = obj(
  {
    type: str({ maxLength: 316 }),
    status: str({ enum: ['True', 'False', 'Unknown'] }),
    reason: str({ maxLength: 1024 }),
    message: str({ maxLength: 32768 }),
    observedGeneration: int({ format: 'int64', minimum: 0 }),
    lastTransitionTime: str({ format: 'date-time' }),
  },
  ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
);

const statusSchema = obj({
  observedGeneration: int({ format: 'int64' }),
  conditions: arr(conditionSchema, {
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['type'],
    maxItems: 8,
  }),
});

const READY_COLUMN = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};
const AGE_COLUMN = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

const agentSpec = obj(
  {
    description: str({ maxLength: 1024 }),
    modelConfig: str({
      pattern: PATTERNS.dns1123Subdomain,
      maxLength: 253,
      description: 'kagent ModelConfig name (same namespace)',
    }),
    systemMessage: str({ minLength: 1, maxLength: 65536 }),
    skills: arr(
      obj(
        {
          id: str({ pattern: '^[A-Za-z0-9._-]{1,64}$' }),
          name: str({ minLength: 1, maxLength: 128 }),
          description: str({ maxLength: 1024 }),
          tags: arr(str({ minLength: 1, maxLength: 64 }), { maxItems: 16, 'x-kubernetes-list-type': 'set' }),
        },
        ['id', 'name'],
      ),
      { maxItems: 32, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['id'] },
    ),
    mcpApiKeySecretRef: secretKeyRef(
      'Secret in the agent namespace whose key holds "Bearer <MCP API key>" for the retrieval MCP route',
    ),
    rateLimit: obj({ requestsPerMinute: int({ minimum: 1, maximum: 10000, default: 60 }) }, [], {
      default: { requestsPerMinute: 60 },
    }),
    public: bool({ default: false, description: 'Render a public JWT route for bound PartnerClients' }),
  },
  ['modelConfig', 'systemMessage', 'mcpApiKeySecretRef'],
);

const roomSpec = obj(
  {
    roomId: str({
      pattern: PATTERNS.roomId,
      maxLength: 255,
      description: 'Exact Matrix room ID (legacy or v12)',
    }),
    allowedClassifications: classifications(),
    agreementRef: str({ minLength: 1, maxLength: 253 }),
    description: str({ maxLength: 1024 }),
  },
  ['roomId'],
  { 'x-kubernetes-validations': CLASSIFICATION_RULES },
);

const partnerSpec = obj(
  {
    issuer: str({ pattern: PATTERNS.httpsUrl, maxLength: 512 }),
    audience: str({ minLength: 1, maxLength: 255 }),
    azp: str({ minLength: 1, maxLength: 255 }),
    policyId: dnsLabel(),
    groups: arr(str({ pattern: PATTERNS.partnerGroup, maxLength: 255 }), {
      minItems: 1,
      maxItems: 16,
      'x-kubernetes-list-type': 'set',
    }),
    allowedClassifications: classifications(),
    agreementRef: str({ minLength: 1, maxLength: 253 }),
    agents: arr(obj({ namespace: dnsLabel(), name: dnsLabel() }, ['namespace', 'name']), {
      maxItems: 64,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['namespace', 'name'],
    }),
  },
  ['issuer', 'audience', 'azp', 'policyId', 'groups'],
  {
    'x-kubernetes-validations': [
      ...CLASSIFICATION_RULES,
      {
        rule: "self.groups.all(g, g.startsWith('partner/' + self.policyId + '/'))",
        message: 'every group must be partner/<policyId>/<group>',
      },
    ],
  },
);

const listenerName = () => dnsLabel();
const platformSpec = obj(
  {
    gateway: obj(
      {
        name: dnsLabel(),
        namespace: dnsLabel(),
        localListener: listenerName(),
        publicListener: listenerName(),
        mcpListener: str({
          pattern: PATTERNS.dns1123Label,
          maxLength: 63,
          description:
            'Listener of the MCP route (default: localListener). Client-sent X-Fgentic-Identity is stripped before routing on every A2A listener that is not also the MCP listener.',
        }),
        mcpUrl: str({
          pattern: PATTERNS.httpUrl,
          maxLength: 512,
          description:
            'Base URL of the proxy for the RemoteMCPServer (default http://<name>.<namespace>.svc.cluster.local:8080)',
        }),
        proxyPodLabels: labels(),
      },
      ['name', 'namespace', 'localListener'],
    ),
    namespaces: obj({ retrieval: dnsLabel(), kagent: dnsLabel(), gateway: dnsLabel() }, [
      'retrieval',
      'kagent',
      'gateway',
    ]),
    bridge: obj(
      {
        workload: dnsLabel(),
        apiKeySecretRef: secretKeyRef('API-key Secret (gateway namespace) of the bridge workload'),
        localServer: str({ pattern: PATTERNS.serverName, maxLength: 255 }),
        serviceUserRegex: str({ pattern: PATTERNS.anchoredRegex, maxLength: 1024 }),
        bridgedOrigins: arr(
          obj(
            { network: dnsLabel(), userIdRegex: str({ pattern: PATTERNS.anchoredRegex, maxLength: 1024 }) },
            ['network', 'userIdRegex'],
          ),
          { maxItems: 32, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['network'] },
        ),
      },
      ['workload', 'apiKeySecretRef', 'localServer', 'serviceUserRegex'],
    ),
    localGroups: arr(str({ pattern: PATTERNS.localGroup, maxLength: 128 }), {
      maxItems: 256,
      'x-kubernetes-list-type': 'set',
    }),
    publicRetrievalTimeoutSeconds: int({ minimum: 1, maximum: 60, default: 30 }),
    jwt: obj(
      {
        issuer: str({ pattern: PATTERNS.httpsUrl, maxLength: 512 }),
        jwksSecretRef: secretKeyRef('Secret (gateway namespace) holding the JWKS JSON'),
        jwksUri: str({ pattern: PATTERNS.httpUrl, maxLength: 2048 }),
      },
      ['issuer'],
      {
        'x-kubernetes-validations': [
          {
            rule: 'has(self.jwksSecretRef) != has(self.jwksUri)',
            message: 'exactly one of jwksSecretRef or jwksUri',
          },
        ],
      },
    ),
    projector: obj({ service: dnsLabel(), port: int({ minimum: 1, maximum: 65535 }) }),
    retrieval: obj({ service: dnsLabel(), port: int({ minimum: 1, maximum: 65535 }) }),
    embeddings: obj(
      {
        url: str({ pattern: PATTERNS.httpUrl, maxLength: 2048 }),
        model: str({ minLength: 1, maxLength: 256 }),
        profile: str({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' }),
        tokenSecretRef: secretKeyRef('Secret (retrieval namespace) holding the embeddings listener token'),
      },
      ['url', 'model', 'profile'],
    ),
    a2aBackend: str({ enum: ['controller', 'agentService'], default: 'controller' }),
    liveRoomCheck: obj(
      {
        enabled: bool({ default: false }),
        homeserverUrl: str({ pattern: PATTERNS.httpUrl, maxLength: 2048 }),
        tokenSecretRef: secretKeyRef('Secret (retrieval namespace) with the homeserver access token'),
      },
      [],
      {
        'x-kubernetes-validations': [
          {
            rule: '!self.enabled || (has(self.homeserverUrl) && has(self.tokenSecretRef))',
            message: 'an enabled live room check needs homeserverUrl and tokenSecretRef',
          },
        ],
      },
    ),
    database: obj({ namespace: dnsLabel(), podLabels: labels(), port: int({ minimum: 1, maximum: 65535 }) }),
    observability: obj({
      namespace: dnsLabel(),
      podLabels: labels(),
      ports: arr(int({ minimum: 1, maximum: 65535 }), { maxItems: 4, 'x-kubernetes-list-type': 'set' }),
    }),
  },
  ['gateway', 'namespaces', 'bridge', 'embeddings'],
  {
    'x-kubernetes-validations': [
      {
        rule: '!has(self.publicRetrievalTimeoutSeconds) || (self.publicRetrievalTimeoutSeconds >= 1 && self.publicRetrievalTimeoutSeconds <= 60)',
        message: 'publicRetrievalTimeoutSeconds must be within 1-60',
      },
      {
        rule: "!has(self.localGroups) || self.localGroups.all(g, !g.startsWith('partner/'))",
        message: 'local groups may not use the partner/ namespace',
      },
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
    spec: agentSpec,
    rootRules: [
      {
        rule: 'self.metadata.name.size() <= 63',
        message: 'the name is the kagent Agent name (DNS-1123 label)',
      },
    ],
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
      labels: {
        'app.kubernetes.io/managed-by': 'fgentic-retrieval',
        'app.kubernetes.io/part-of': 'fgentic-retrieval',
      },
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
              required: ['spec'],
              properties: {
                apiVersion: str(),
                kind: str(),
                metadata: { type: 'object' },
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
