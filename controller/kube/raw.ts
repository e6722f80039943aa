/** The controller's plain-JSON requests: common/kube-request.ts (shared with the servers' watches). */
export { ApiError, collectionPath, type RawRequest, requestJson } from '../../common/kube-request.ts';
