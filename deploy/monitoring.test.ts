/**
 * The monitoring component (deploy/components/monitoring): every alert and dashboard expression
 * parses with the Prometheus project's PromQL grammar and names only metrics that the four servers
 * really export on their live /metrics; every alert has a runbook; the ServiceMonitors select the
 * Services of deploy/base.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parser } from '@prometheus-io/lezer-promql';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { hasOpenssl, makeSelfSignedCert } from '../common/dev-tls.ts';
import { type ControllerHandle, startController } from '../controller/cli.ts';
import { render } from '../controller/render/index.ts';
import type { K8sObject } from '../controller/types.ts';
import { type RunningProjector, startProjector } from '../projector/index.ts';
import { kubeConfigStore } from '../projector/kube-store.ts';
import { type RetrievalServer, startRetrievalServer } from '../retrieval/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { reviewBytes } from '../webhook/review.ts';
import { startWebhookServer, type WebhookServer } from '../webhook/server.ts';
import { StaticClusterView } from '../webhook/view.ts';

const repo = resolve(import.meta.dirname, '..');
const component = join(repo, 'deploy/components/monitoring');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const ruleDoc = parseYaml(readFileSync(join(component, 'prometheusrule.yaml'), 'utf8'));
const rules: Rule[] = ruleDoc.spec.groups.flatMap((g: { rules: Rule[] }) => g.rules);
const dashboard = JSON.parse(readFileSync(join(component, 'dashboard.json'), 'utf8'));
const panelExprs: { title: string; expr: string }[] = dashboard.panels.flatMap(
  (p: { title: string; targets?: { expr: string }[] }) =>
    (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })),
);

/** Functions whose argument must be a range vector (PromQL's type rule the grammar does not check). */
const RANGE_FUNCTIONS = new Set([
  'rate',
  'irate',
  'increase',
  'delta',
  'idelta',
  'deriv',
  'changes',
  'resets',
  'avg_over_time',
  'min_over_time',
  'max_over_time',
  'sum_over_time',
  'count_over_time',
  'last_over_time',
  'quantile_over_time',
  'predict_linear',
  'absent_over_time',
]);

/** Parse with lezer-promql: syntax errors, range-function arguments and the metric names used. */
function analyse(expr: string): { errors: string[]; metrics: Set<string> } {
  const errors: string[] = [];
  const metrics = new Set<string>();
  const tree = parser.parse(expr);
  tree.iterate({
    enter(n) {
      if (n.type.isError) errors.push(`syntax error at ${n.from}: ${JSON.stringify(expr.slice(n.from, n.to + 10))}`);
      if (n.name === 'VectorSelector') {
        const id = n.node.getChild('Identifier');
        if (id) metrics.add(expr.slice(id.from, id.to));
      }
      if (n.name === 'FunctionCall') {
        const fn = n.node.getChild('FunctionIdentifier');
        const name = fn ? expr.slice(fn.from, fn.to) : '';
        const body = n.node.getChild('FunctionCallBody');
        const args: string[] = [];
        for (let c = body?.firstChild; c; c = c.nextSibling)
          if (c.name !== '(' && c.name !== ')' && c.name !== ',') args.push(c.name);
        const rangeArg =
          name === 'quantile_over_time' || name === 'predict_linear'
            ? name === 'predict_linear'
              ? args[0]
              : args[1]
            : args[0];
        if (RANGE_FUNCTIONS.has(name) && !['MatrixSelector', 'SubqueryExpr', 'OffsetExpr'].includes(rangeArg ?? ''))
          errors.push(`${name}() needs a range vector, got ${rangeArg ?? 'nothing'}`);
      }
    },
  });
  const top = tree.topNode.firstChild;
  if (top && ['MatrixSelector', 'SubqueryExpr'].includes(top.name)) errors.push('a range vector cannot be the result');
  return { errors, metrics };
}

describe('PromQL of the alerts and the dashboard (lezer-promql)', () => {
  it('the checker reports syntax errors, unknown functions and an instant vector given to rate()', () => {
    assert.ok(analyse('sum(rate(foo_total[5m]) >').errors.length > 0);
    assert.ok(analyse('ratee(foo_total[5m])').errors.length > 0);
    assert.ok(analyse('rate(foo_total)').errors.length > 0);
    assert.ok(analyse('foo_total[5m]').errors.length > 0);
    assert.deepEqual(analyse('sum by (x) (rate(foo_total[5m] offset 5m)) > 0').errors, []);
    assert.deepEqual([...analyse('absent(a) or vector(0) - time() + b{c="d"}').metrics].sort(), ['a', 'b']);
  });

  for (const r of rules)
    it(`alert ${r.alert} parses`, () => {
      const a = analyse(r.expr);
      assert.deepEqual(a.errors, []);
      assert.ok(a.metrics.size > 0, 'names at least one metric');
    });

  it('every dashboard query parses', () => {
    assert.ok(panelExprs.length >= 15);
    for (const p of panelExprs) assert.deepEqual(analyse(p.expr).errors, [], p.title);
  });
});

describe('alerts: coverage, labels and runbooks', () => {
  const runbooks = readFileSync(join(repo, 'docs/runbooks.md'), 'utf8');
  const headings = [...runbooks.matchAll(/^### (\S+)$/gm)].map((m) => m[1] as string);

  it('covers what an operator must hear about', () => {
    const uses = (re: RegExp) => rules.filter((r) => re.test(r.expr)).map((r) => r.alert);
    assert.ok(uses(/fgentic_retrieval_tool_calls_without_carrier_total/).length, 'tool calls without a carrier');
    assert.ok(
      uses(/sum by \(reason\) \(rate\(fgentic_retrieval_denials_total/).length,
      'retrieval denial spike by reason',
    );
    assert.ok(uses(/fgentic_projector_decisions_total\{decision="deny"\}/).length, 'projector denial spike');
    assert.ok(uses(/fgentic_projector_config_ready == 0/).length, 'projector / registry not ready');
    assert.ok(uses(/reason="RegistryTooLarge"/).length, 'RegistryTooLarge');
    assert.ok(uses(/reason="UnsupportedUpstream"/).length, 'UnsupportedUpstream');
    assert.ok(uses(/type="Conflict", status="True"/).length, 'Conflict');
    assert.ok(uses(/fgentic_retrieval_ready == 0/).length, 'retrieval not ready (database)');
    assert.ok(uses(/reason="database_unavailable"/).length, 'database errors');
    // A dead, stuck or non-leading controller, or a projector cut off from the API: revocations stop.
    const stale = uses(/fgentic_controller_heartbeats_total\{result="ok"\}/);
    assert.deepEqual(stale, ['FgenticRegistryStale'], 'controller heartbeat not written');
    for (const m of [
      'fgentic_projector_controller_heartbeat_age_seconds',
      'fgentic_projector_registry_staleness_seconds',
    ])
      assert.deepEqual(uses(new RegExp(`${m}\\) > 30`)), stale, `${m} past the projector's bound`);
  });

  for (const r of rules)
    it(`${r.alert}: severity, for, summary, description and a runbook section`, () => {
      assert.match(r.alert, /^Fgentic[A-Za-z]+$/);
      assert.ok(['critical', 'warning'].includes(r.labels?.severity ?? ''), 'severity');
      assert.match(r.for ?? '', /^\d+[smh]$/);
      assert.ok(r.annotations?.summary && r.annotations.description, 'summary and description');
      const url = r.annotations?.runbook_url ?? '';
      assert.ok(url.endsWith(`docs/runbooks.md#${r.alert.toLowerCase()}`), url);
      assert.ok(headings.includes(r.alert), `docs/runbooks.md has no "### ${r.alert}"`);
    });

  it('every runbook section belongs to an alert, and alert names are unique', () => {
    const names = rules.map((r) => r.alert);
    assert.equal(new Set(names).size, names.length);
    assert.deepEqual(
      headings.filter((h) => !names.includes(h)),
      [],
    );
  });
});

describe('the component', () => {
  const kustomization = parseYaml(readFileSync(join(component, 'kustomization.yaml'), 'utf8'));
  const services = parseAllDocuments(readFileSync(join(repo, 'deploy/base/services.yaml'), 'utf8')).map(
    (d) => d.toJSON() as K8sObject & { spec: { ports: { name: string }[] } },
  );
  const monitors = parseAllDocuments(readFileSync(join(component, 'servicemonitors.yaml'), 'utf8')).map(
    (d) => d.toJSON() as K8sObject & { spec: any },
  );

  it('is a kustomize Component listing its files', () => {
    assert.equal(kustomization.kind, 'Component');
    for (const f of kustomization.resources) readFileSync(join(component, f));
    const gen = kustomization.configMapGenerator[0];
    assert.equal(gen.options.labels.grafana_dashboard, '1');
    assert.equal(gen.files[0], 'fgentic-retrieval.json=dashboard.json');
  });

  it('each ServiceMonitor selects exactly one Service of deploy/base, in its namespace, by an existing port', () => {
    assert.equal(monitors.length, 4);
    for (const m of monitors) {
      assert.equal(m.apiVersion, 'monitoring.coreos.com/v1');
      const match = services.filter(
        (s) =>
          s.metadata.namespace === m.metadata.namespace &&
          Object.entries(m.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v),
      );
      assert.equal(match.length, 1, `${m.metadata.name} matches ${match.length} Services`);
      for (const e of m.spec.endpoints) {
        assert.ok(
          match[0]?.spec.ports.some((p) => p.name === e.port),
          `${m.metadata.name}: port ${e.port}`,
        );
        assert.equal(e.path, '/metrics');
      }
    }
    const selected = monitors.map((m) => m.metadata.name).sort();
    assert.deepEqual(selected, ['fgentic-controller', 'fgentic-projector', 'fgentic-webhook', 'knowledge-retrieval']);
  });

  it('the dashboard is a Grafana dashboard on a Prometheus datasource variable', () => {
    assert.equal(dashboard.uid, 'fgentic-retrieval');
    assert.ok(dashboard.templating.list.some((v: any) => v.type === 'datasource' && v.query === 'prometheus'));
    const ids = dashboard.panels.map((p: { id: number }) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  });
});

/** Sample names a /metrics text exposes: from `# TYPE` lines, so metrics without samples count too. */
function sampleNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [name, type] = [m[1] as string, m[2] as string];
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(name + s);
    else if (type === 'summary') for (const s of ['', '_sum', '_count']) out.add(name + s);
    else out.add(name);
  }
  return out;
}

/** GET /metrics on a fresh connection (no pooled keep-alive socket a server may have closed meanwhile). */
function scrape(url: string): Promise<string> {
  return new Promise((ok, fail) => {
    const req = httpGet(url, { agent: false }, (res) => collect(res, ok, fail));
    req.on('error', fail);
  });
}

function scrapeTls(port: number, ca: string): Promise<string> {
  return new Promise((ok, fail) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/metrics', ca, servername: 'localhost', agent: false },
      (res) => collect(res, ok, fail),
    );
    req.on('error', fail);
    req.end();
  });
}

function collect(res: IncomingMessage, ok: (body: string) => void, fail: (e: Error) => void) {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (c) => {
    body += c;
  });
  res.on('end', () => (res.statusCode === 200 ? ok(body) : fail(new Error(`status ${res.statusCode}`))));
}

function configMapJson(objects: K8sObject[], name: string, key: string): string {
  const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name);
  return (cm?.['data'] as Record<string, string> | undefined)?.[key] ?? '';
}

describe('expressions name only metrics the servers export (live /metrics)', () => {
  const exported = new Map<string, Set<string>>();
  const api = new ApiServerDouble();
  let retrieval: RetrievalServer | undefined;
  let projector: RunningProjector | undefined;
  let controller: ControllerHandle | undefined;
  let webhook: WebhookServer | undefined;
  const tlsDir = mkdtempSync(join(tmpdir(), 'fgentic-monitoring-'));
  const input = examples();
  const objects = render(input).objects;
  // A second RetrievalRoom for an existing room ID: a DuplicateRoom conflict the conditions gauge must show.
  const room = structuredClone(input.rooms[0]!);
  room.metadata = { name: 'duplicate-of-first-room' };

  before(async () => {
    retrieval = await startRetrievalServer({
      agents: JSON.parse(configMapJson(objects, 'fgentic-retrieval-config', 'retrieval.json')).agents,
      dataDir: 'memory',
      host: '127.0.0.1',
      port: 0,
    });
    exported.set('retrieval', sampleNames(await scrape(`${retrieval.url}/metrics`)));

    await api.start();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners, room]) api.put(r);
    const started = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'monitoring-test',
      // client-go's timing: the retrieval server's embedded database shares this event loop, and a
      // renewal late past a 1 s lease's deadline would end the term (leader.ts).
      debounceMs: 20,
      heartbeatPeriodMs: 1000,
    });
    controller = started;
    await waitFor('first reconcile', () => started.reconciles() > 0);
    await controller.idle();
    exported.set('controller', sampleNames(await scrape(`http://127.0.0.1:${controller.port}/metrics`)));

    // The projector as deployed: its registry (and the controller's heartbeat) read from the API.
    const store = kubeConfigStore({
      kubeConfig: api.kubeConfig(serviceAccountUser('knowledge', 'fgentic-projector')),
      namespace: 'knowledge',
    });
    projector = await startProjector({ store, host: '127.0.0.1', port: 0 });
    await store.synced;
    await waitFor('the projector sees the heartbeat', () => Number.isFinite(store.heartbeatAgeSeconds()));
    exported.set('projector', sampleNames(await scrape(`${projector.url}/metrics`)));

    if (hasOpenssl()) {
      const { cert } = makeSelfSignedCert(tlsDir, { cn: 'localhost' });
      webhook = await startWebhookServer({
        certDir: tlsDir,
        host: '127.0.0.1',
        port: 0,
        handler: (b) => reviewBytes(b, new StaticClusterView([])),
      });
      exported.set('webhook', sampleNames(await scrapeTls(webhook.port, cert)));
    }
  });
  after(async () => {
    await controller?.stop();
    await api.stop();
    await webhook?.close();
    await projector?.close();
    await retrieval?.close();
    rmSync(tlsDir, { recursive: true, force: true });
  });

  const all = () => new Set([...exported.values()].flatMap((s) => [...s]));

  it('each server exposes its own metrics (the scrape is real)', () => {
    assert.ok(exported.get('retrieval')?.has('fgentic_retrieval_tool_calls_without_carrier_total'));
    assert.ok(exported.get('retrieval')?.has('fgentic_retrieval_ready'));
    assert.ok(exported.get('projector')?.has('fgentic_projector_config_ready'));
    assert.ok(exported.get('controller')?.has('fgentic_controller_resource_conditions'));
  });

  it('the webhook is scraped over HTTPS (needs openssl for its certificate)', (t) => {
    if (!hasOpenssl()) return t.skip('openssl not on PATH: the webhook was not started');
    assert.ok(exported.get('webhook')?.has('fgentic_webhook_certificate_not_after_seconds'));
  });

  for (const r of rules)
    it(`alert ${r.alert} names only exported metrics`, (t) => {
      const names = [...analyse(r.expr).metrics];
      if (!hasOpenssl() && names.some((n) => n.startsWith('fgentic_webhook_')))
        return t.skip('openssl not on PATH: the webhook was not started');
      assert.deepEqual(
        names.filter((n) => !all().has(n)),
        [],
      );
    });

  it('every dashboard query names only exported metrics', (t) => {
    const missing = panelExprs.flatMap((p) =>
      [...analyse(p.expr).metrics]
        .filter((n) => !all().has(n) && (hasOpenssl() || !n.startsWith('fgentic_webhook_')))
        .map((n) => `${p.title}: ${n}`),
    );
    assert.deepEqual(missing, []);
    if (!hasOpenssl()) t.diagnostic('webhook metrics not checked: openssl not on PATH');
  });

  it('an expression with a metric no server exports is caught', () => {
    const names = [...analyse('sum(rate(fgentic_retrieval_denied_total[5m])) > 0').metrics];
    assert.deepEqual(
      names.filter((n) => !all().has(n)),
      ['fgentic_retrieval_denied_total'],
    );
  });

  it('the controller reports its resources by condition: Ready, Degraded (no MCP key), the DuplicateRoom conflict', async () => {
    const text = await scrape(`http://127.0.0.1:${controller!.port}/metrics`);
    const value = (labels: string) =>
      Number(text.match(new RegExp(`^fgentic_controller_resource_conditions\\{${labels}\\} (\\d+)$`, 'm'))?.[1] ?? NaN);
    assert.equal(value('kind="RetrievalRoom",type="Conflict",status="True",reason="DuplicateRoom"'), 2);
    // No MCP key Secret exists in the double, so the Agent is degraded (its MCP route fails closed).
    assert.equal(
      value('kind="RetrievalAgent",type="Degraded",status="True",reason="McpKeyUnavailable"'),
      input.agents.length,
    );
    assert.equal(value('kind="PartnerClient",type="Ready",status="True",reason="Rendered"'), input.partners.length);
  });

  it("FgenticRegistryStale's series are live: the leader's heartbeats count up, the projector sees them within its bound", async () => {
    const value = (text: string, series: string) =>
      Number(text.match(new RegExp(`^${series} (\\S+)$`, 'm'))?.[1] ?? Number.NaN);
    const ctl = await scrape(`http://127.0.0.1:${controller!.port}/metrics`);
    assert.ok(value(ctl, 'fgentic_controller_heartbeats_total\\{result="ok"\\}') > 0, 'heartbeats written');
    const proj = await scrape(`${projector!.url}/metrics`);
    const age = value(proj, 'fgentic_projector_controller_heartbeat_age_seconds');
    assert.ok(age >= 0 && age <= 30, `heartbeat age ${age}`);
    assert.equal(value(proj, 'fgentic_projector_registry_staleness_seconds'), 0, 'watch open');
  });

  it('fgentic_retrieval_ready follows the database: 1 while reachable, 0 once it is gone', async () => {
    assert.match(await scrape(`${retrieval!.url}/metrics`), /^fgentic_retrieval_ready 1$/m);
    await retrieval!.pool.end();
    assert.match(await scrape(`${retrieval!.url}/metrics`), /^fgentic_retrieval_ready 0$/m);
  });
});
