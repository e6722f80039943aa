/**
 * Where a server that reads its configuration through the Kubernetes API finds its cluster and its
 * namespace. `@kubernetes/client-node` is loaded only here and only when asked for, so a server run
 * from a file never pays for it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { fsProblem } from './fs-problem.ts';

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

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * The kubeconfig to use — `file` (a `--kubeconfig` flag), else KUBECONFIG, else ~/.kube/config, else
 * the in-cluster service account — or a sentence naming the sources tried and what failed, without
 * any file content. Without this check the client library falls back to http://localhost:8080, and a
 * server would retry its watches there forever instead of saying what is missing.
 */
export async function loadKubeConfig(
  file?: string,
): Promise<{ kubeConfig: KubeConfig; source: string } | { error: string }> {
  const k8s = await import('@kubernetes/client-node');
  const kubeConfig = new k8s.KubeConfig();
  const envFiles = (process.env['KUBECONFIG'] ?? '').split(delimiter).filter(Boolean);
  const home = join(homedir(), '.kube', 'config');
  let source: string;
  try {
    if (file !== undefined) {
      source = `--kubeconfig ${file}`;
      kubeConfig.loadFromFile(file);
    } else if (envFiles.length > 0) {
      source = `KUBECONFIG ${envFiles.join(delimiter)}`;
      kubeConfig.loadFromDefault();
    } else if (existsSync(home)) {
      source = home;
      kubeConfig.loadFromFile(home);
    } else if (existsSync(SERVICE_ACCOUNT_TOKEN)) {
      source = 'the in-cluster service account';
      kubeConfig.loadFromCluster();
    } else
      return {
        error: `no kubeconfig: tried --kubeconfig (not given), KUBECONFIG (unset), ${home} (absent) and the in-cluster service account (${SERVICE_ACCOUNT_TOKEN} absent)`,
      };
  } catch (e) {
    const which = file ?? (envFiles.length > 0 ? envFiles.join(delimiter) : home);
    return {
      error: `kubeconfig ${which}: ${(e as NodeJS.ErrnoException).code ? fsProblem(e) : 'cannot be parsed'}`,
    };
  }
  if (!kubeConfig.getCurrentCluster()?.server)
    return { error: `kubeconfig from ${source}: no current context with a cluster server` };
  return { kubeConfig, source };
}

/**
 * Whether the API server answers (GET /version within 10 s), or why not, in words. A server that
 * cannot work at all without the API (controller, webhook) exits with this instead of retrying.
 */
export async function apiServerProblem(kubeConfig: KubeConfig, source: string): Promise<string | undefined> {
  const k8s = await import('@kubernetes/client-node');
  const server = kubeConfig.getCurrentCluster()?.server ?? '(none)';
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      kubeConfig.makeApiClient(k8s.VersionApi).getCode(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error(), { code: 'ETIMEDOUT' })), 10_000);
        timer.unref();
      }),
    ]);
    return undefined;
  } catch (e) {
    const err = e as { code?: string; cause?: { code?: string }; statusCode?: number };
    const why =
      err.cause?.code ?? err.code ?? (typeof err.statusCode === 'number' ? `HTTP ${err.statusCode}` : 'error');
    return `cannot reach the API server ${server} (kubeconfig from ${source}): ${why === 'ECONNREFUSED' ? 'connection refused' : why}`;
  } finally {
    clearTimeout(timer);
  }
}
