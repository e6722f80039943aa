/**
 * Shared shapes of the admission rules: the request the rules see, their verdict, and the view of the
 * other objects in the cluster (or in the offline file set). No I/O here.
 */
import { field as readField, isObject as readObject, stringField } from '../../common/json-read.ts';
import { IDENTITY_HEADER_NAME, PROJECT, type Problems, RETRIEVAL_SERVER, RETRIEVAL_TOOL } from '../../rules/index.ts';

export {
  formatProblem as formatFinding,
  MANAGED_BY_LABEL,
  partnerKey,
  ROLE_LABEL,
  ROLE_VALUE,
} from '../../rules/index.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A Kubernetes object as decoded JSON; only `metadata` is assumed to be an object when present. */
export type KubeObject = JsonObject;

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** The part of an AdmissionRequest the rules depend on. */
export interface AdmissionInput {
  operation: Operation;
  kind: GroupVersionKind;
  /** Present for CREATE/UPDATE; null for DELETE. */
  object: KubeObject | null;
  /** Present for UPDATE/DELETE; null for CREATE. */
  oldObject: KubeObject | null;
  /** Request namespace/name (fall back to the object's metadata). */
  namespace: string;
  name: string;
  username: string;
}

/**
 * One finding: reason code, field path, message. A rule problem (rules/result.ts, whose codes are in
 * rules/reasons.ts) is one; the kagent Agent rules add their own codes (webhook/README.md).
 */
export interface Finding {
  readonly reason: string;
  readonly path: string;
  readonly message: string;
}

export interface Verdict {
  denials: Finding[];
  warnings: Finding[];
}

/** The objects other than the one under review that the cross-object rules need. */
export interface ClusterView {
  retrievalAgent(namespace: string, name: string): KubeObject | undefined;
  /** How many RetrievalAgents exist (for the agent limit). */
  retrievalAgentCount(): number;
  /** kagent Agent (any served version) by namespace/name. */
  agent(namespace: string, name: string): KubeObject | undefined;
  /** The cluster's RetrievalPlatform (named `default`), if any. */
  platform(): KubeObject | undefined;
  rooms(): readonly KubeObject[];
  partners(): readonly KubeObject[];
  /** RetrievalRooms whose spec.roomId is `roomId` (indexed; rooms() filtered otherwise). */
  roomsWithId(roomId: string): readonly KubeObject[];
  /** PartnerClients with this (issuer, audience, azp) mapping key. */
  partnersWithKey(issuer: string, audience: string, azp: string): readonly KubeObject[];
}

export interface RulesConfig {
  /** The reconciler's user; the only one allowed to change retrieval Agents. */
  controllerUser: string;
  /** Users allowed to DELETE retrieval Agents besides the controller (garbage collection, namespace teardown). */
  deleteUsers: readonly string[];
  retrievalServerName: string;
  identityHeader: string;
  retrievalTool: string;
}

export const CONTROLLER_USER = 'system:serviceaccount:fgentic-system:fgentic-retrieval-controller';
export const MANAGED_BY_VALUE = PROJECT;
export const RETRIEVAL_GROUP = 'retrieval.fgentic.dev';
export const KAGENT_GROUP = 'kagent.dev';

export const DEFAULT_RULES_CONFIG: RulesConfig = {
  controllerUser: CONTROLLER_USER,
  deleteUsers: [
    'system:serviceaccount:kube-system:generic-garbage-collector',
    'system:serviceaccount:kube-system:namespace-controller',
  ],
  retrievalServerName: RETRIEVAL_SERVER,
  identityHeader: IDENTITY_HEADER_NAME,
  retrievalTool: RETRIEVAL_TOOL,
};

// The readers of common/json-read.ts, typed as the review's JSON.
export const isObject = readObject as (v: unknown) => v is JsonObject;
export const field = readField as (o: unknown, key: string) => Json | undefined;
export const str = stringField;

export function meta(o: KubeObject | null | undefined): JsonObject {
  const m = o ? field(o, 'metadata') : undefined;
  return isObject(m) ? m : {};
}

export function labels(o: KubeObject | null | undefined): JsonObject {
  const l = field(meta(o), 'labels');
  return isObject(l) ? l : {};
}

export function nameOf(o: KubeObject | null | undefined): string {
  return str(meta(o), 'name') ?? '';
}

export function namespaceOf(o: KubeObject | null | undefined): string {
  return str(meta(o), 'namespace') ?? '';
}

/** Collects findings while a rule walks an object. */
export class Findings implements Verdict {
  readonly denials: Finding[] = [];
  readonly warnings: Finding[] = [];
  deny(reason: string, path: string, message: string): void {
    this.denials.push({ reason, path, message });
  }
  warn(reason: string, path: string, message: string): void {
    this.warnings.push({ reason, path, message });
  }
  /** Deny with every problem a rule module reported. */
  add(problems: Problems): void {
    this.denials.push(...problems);
  }
}
