/**
 * Where a server that reads its configuration through the Kubernetes API finds its cluster and its
 * namespace. `@kubernetes/client-node` is loaded only here and only when asked for, so a server run
 * from a file never pays for it.
 */
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';

/** The service account's namespace file (mounted into every pod that has a token). */
const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The namespace to read: the flag, then POD_NAMESPACE, then the pod's service account; or none. */
export function configNamespace(flag: string | undefined): string | undefined {
  if (flag !== undefined) return flag;
  const env = process.env['POD_NAMESPACE'];
  if (env !== undefined) return env;
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || undefined;
  } catch {
    // Not in a pod (ENOENT) or not readable: no namespace from here; the caller reports the gap.
    return undefined;
  }
}

/**
 * The default kubeconfig (KUBECONFIG, ~/.kube/config, or the in-cluster service account), or why
 * there is none usable: a sentence without the file's contents.
 */
export async function loadKubeConfig(): Promise<{ kubeConfig: KubeConfig } | { error: string }> {
  const k8s = await import('@kubernetes/client-node');
  const kubeConfig = new k8s.KubeConfig();
  try {
    kubeConfig.loadFromDefault();
    if (kubeConfig.getCurrentCluster() === null) throw new Error('no current cluster');
  } catch (e) {
    return { error: `no usable kubeconfig (${(e as Error).message})` };
  }
  return { kubeConfig };
}
