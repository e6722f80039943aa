/** The ADR 0017 identity contract: pure code, no I/O. Every other component imports only this file. */
export * from './attribution.ts';
export * from './base64url.ts';
export * from './carrier.ts';
export * from './identifiers.ts';
export * from './jcs.ts';
export * from './metadata.ts';
export * from './principal.ts';
export * from './projection.ts';
export * from './reasons.ts';
export * from './room.ts';
export * from './room-context.ts';
export * from './snapshot.ts';
export * from './strict-json.ts';
