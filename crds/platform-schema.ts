import {
  A2A_BACKENDS,
  BRIDGE_REGEX_SCHEMA,
  DATABASE_URL_SCHEMA,
  DEFAULT_POOLER,
  IDENTITY_HEADER_NAME,
  ISSUER_SCHEMA,
  LOCAL_GROUP_MAX,
  LOCAL_GROUPS_CEL,
  MAX_BRIDGED_ORIGINS,
  MAX_LOCAL_GROUPS,
  MAX_OBSERVABILITY_PORTS,
  MAX_REPLICA_LAG,
  MAX_REPLICAS,
  MCP_URL_MAX,
  MODEL_SCHEMA,
  POOLER_MODES,
  PORT_SCHEMA,
  PROFILE_CEL,
  PROFILE_SCHEMA,
  PUBLIC_TIMEOUT_CEL,
  PUBLIC_TIMEOUT_SCHEMA,
  SERVER_NAME_SCHEMA,
  SERVICE_URL_SCHEMA,
} from '../rules/index.ts';
import {
  CAPABILITY_MODES,
  DEFAULT_CAPABILITY,
  LEDGER_MINT_WINDOW,
  LEDGER_RECORD_DEADLINE,
  LEDGER_TIMING_CEL,
} from '../rules/ledger.ts';
import { arr, bool, dnsLabel, int, labels, obj, PATTERNS, port, secretKeyRef, str, url } from './schema-kit.ts';

const listenerName = (description: string) => dnsLabel(description);
export const platformSpec = obj(
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
        workload: dnsLabel('Workload name in the API key metadata of the Matrix bridge (e.g. matrix-a2a-bridge).'),
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
            description: 'Bridged networks whose puppet users are classified as bridged callers, keyed by network.',
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
          description: 'Model name sent to the endpoint (e.g. BAAI/bge-m3): printable ASCII, no space at either end.',
        }),
        profile: str({
          ...PROFILE_SCHEMA,
          'x-kubernetes-validations': [{ ...PROFILE_CEL }],
          description: 'Embedding profile; must equal the one recorded in the database or the server refuses to serve.',
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
        replicaUrls: arr(
          str({
            ...structuredClone(DATABASE_URL_SCHEMA),
            description:
              'A read replica (or a read-only Service in front of replicas), postgres://host[:port][/database][?key=value&...], without user or password: the server logs in with PGUSER/PGPASSWORD as on the primary.',
          }),
          {
            maxItems: MAX_REPLICAS,
            'x-kubernetes-list-type': 'set',
            description:
              'Read replicas searches may go to while they are within maxReplicaLagMilliseconds of the primary; everything else stays on the primary (DATABASE_URL).',
          },
        ),
        maxReplicaLagMilliseconds: int({
          minimum: MAX_REPLICA_LAG.min,
          maximum: MAX_REPLICA_LAG.max,
          default: MAX_REPLICA_LAG.default,
          description:
            'The revocation bound on replicas: an ACL change committed on the primary is never served by a replica later than this after its commit (ms).',
        }),
        pooler: str({
          enum: [...POOLER_MODES],
          default: DEFAULT_POOLER,
          description:
            'none (the URLs are PostgreSQL servers) or transaction (every database URL is a pooler such as PgBouncer in transaction mode).',
        }),
      },
      [],
      {
        description:
          'The database the retrieval server searches: where it may connect (its egress NetworkPolicy) and its read replicas.',
      },
    ),
    observability: obj(
      {
        namespace: dnsLabel('Namespace of the telemetry collector (default monitoring).'),
        podLabels: labels('Pod labels of the telemetry collector (default: the OpenTelemetry collector labels).'),
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
