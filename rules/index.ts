/** Resource rules, one module a family; pure (no I/O), shared by the CRDs, the reconciler, the webhook and the projector. */
export * from './agent-bound.ts';
export * from './bridge.ts';
export * from './classifications.ts';
export * from './issuers.ts';
export * from './labels.ts';
export * from './limits.ts';
export * from './names.ts';
export * from './partners.ts';
export * from './result.ts';
export * from './timeouts.ts';
export * from './wire.ts';
