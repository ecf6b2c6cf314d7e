import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import {
  httpTimeoutsFromEnv,
  shutdownDelayMsFromEnv,
  stopDeadlineMs,
  trustProxyFromEnv,
} from '@stablepay/http';

/**
 * No Docker engine runs on development machines, so the distributed deployment is checked by reading it:
 * every app under apps/ must have a compose service built from deploy/ and a Kubernetes Deployment, Service
 * and ConfigMap, each with health checks, and the kustomization must list them all.
 */
const root = join(__dirname, '..', '..');
const apps = readdirSync(join(root, 'apps'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();

interface ComposeService {
  build?: { context: string; dockerfile: string; args?: Record<string, string> };
  healthcheck?: { test: string[] };
  environment?: Record<string, string>;
  depends_on?: Record<string, unknown>;
  command?: string[];
  entrypoint?: string[];
  restart?: string;
}

interface K8sContainer {
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
}

const k8sDocs = (file: string) =>
  parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', file), 'utf8')).map(
    (d) =>
      d.toJSON() as {
        kind: string;
        metadata: { name: string };
        data?: Record<string, string>;
        spec?: { template?: { spec: { containers: K8sContainer[] } } };
      },
  );
const containerOf = (app: string): K8sContainer | undefined =>
  k8sDocs(`${app}.yaml`).find((d) => d.kind === 'Deployment')?.spec?.template?.spec.containers[0];

/** The apps that send transactions: their main.ts reads the chain layer with its key (chainOperatorConfigFromEnv). */
const actsOnChain = apps.filter((app) =>
  /chainOperatorConfigFromEnv\(|payoutChainsFromEnv\(/.test(
    readFileSync(join(root, 'apps', app, 'src', 'main.ts'), 'utf8'),
  ),
);
/**
 * The roles as public addresses: they fix every contract address, so the gateway computes from them the registry
 * and payment factory GET /settings shows, without the key (publicRolesFromEnv, docs/chain-operator.md).
 */
const PUBLIC_ROLES = ['OPERATOR_ADDRESS', 'REGISTRY_ADMIN_ADDRESS', 'OPERATOR_PAUSER_ADDRESS'];
/** The chain layer's variables a process needs besides its key (keyless reads: chain time, offered tokens). */
const CHAIN_ENV = ['CHAIN_RPC_URLS', 'CHAIN_MODE', 'CHAIN_CONFIRMATIONS', 'OPERATOR_PAUSER_ADDRESS'];

describe('distributed deployment files', () => {
  it('has the eight services of the design and the relay', () => {
    expect(apps).toEqual([
      'charge-ledger',
      'gateway',
      'indexer',
      'payments',
      'payouts',
      'relay',
      'settlement',
      'subscriptions',
      'webhook-dispatch',
    ]);
  });

  const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };

  it('docker-compose runs Kafka (KRaft), EventStoreDB, PostgreSQL and an anvil chain with health checks', () => {
    for (const infra of ['kafka', 'eventstore', 'postgres', 'anvil']) {
      expect(compose.services[infra]?.healthcheck?.test.length).toBeGreaterThan(0);
    }
    expect(JSON.stringify(compose.services['kafka'])).toContain('KAFKA_PROCESS_ROLES');
  });

  it.each(apps)(
    'docker-compose builds %s from deploy/ with a readiness health check and the distributed adapters',
    (app) => {
      const service = compose.services[app];
      expect(service).toBeDefined();
      expect(service?.build).toMatchObject({ dockerfile: 'deploy/Dockerfile', args: { SERVICE: app } });
      expect(service?.healthcheck?.test.join(' ')).toContain('/ready');
      expect(service?.environment).toMatchObject({ EVENT_STORE: 'esdb', EVENT_BUS: 'kafka' });
      expect(Object.keys(service?.depends_on ?? {})).toEqual(
        expect.arrayContaining(['postgres', 'kafka', 'eventstore']),
      );
    },
  );

  it('runs exactly one relay wherever a service uses the Kafka bus (without it no consumer sees an event)', () => {
    const onKafka = Object.values(compose.services).filter((s) => s.environment?.['EVENT_BUS'] === 'kafka');
    expect(onKafka.length).toBeGreaterThan(0);
    expect(compose.services['relay']?.build?.args?.['SERVICE']).toBe('relay');
    expect(compose.services['relay']?.environment?.['EVENT_BUS']).toBe('kafka');
    const relay = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', 'relay.yaml'), 'utf8'))
      .map((d) => d.toJSON() as { kind: string; spec?: { replicas?: number; strategy?: { type: string } } })
      .find((d) => d.kind === 'Deployment');
    expect(relay?.spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
  });

  it('the command owners expose their command port and the gateway knows where they are', () => {
    expect(compose.services['gateway']?.environment?.['COMMAND_TRANSPORT']).toBe('tcp');
    for (const owner of ['payments', 'payouts', 'subscriptions', 'webhook-dispatch']) {
      const docs = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', `${owner}.yaml`), 'utf8')).map(
        (d) => d.toJSON() as { kind: string; spec?: { ports?: Array<{ name: string; port: number }> } },
      );
      expect(docs.find((d) => d.kind === 'Service')?.spec?.ports).toContainEqual(
        expect.objectContaining({ name: 'commands', port: 4000 }),
      );
    }
    const gateway = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', 'gateway.yaml'), 'utf8'))
      .map((d) => d.toJSON() as { kind: string; data?: Record<string, string> })
      .find((d) => d.kind === 'ConfigMap');
    expect(gateway?.data).toMatchObject({
      COMMAND_TRANSPORT: 'tcp',
      PAYMENTS_COMMANDS_ADDRESS: 'payments:4000',
      PAYOUTS_COMMANDS_ADDRESS: 'payouts:4000',
      SUBSCRIPTIONS_COMMANDS_ADDRESS: 'subscriptions:4000',
      WEBHOOK_DISPATCH_COMMANDS_ADDRESS: 'webhook-dispatch:4000',
    });
  });

  it('names the public address of the hosted pages where checkout_url is built (never a pod address)', () => {
    for (const app of ['gateway', 'subscriptions', 'payments']) {
      // Compose interpolates it with a default: `${HOSTED_URL:-http://localhost:3000/hosted}`.
      expect(compose.services[app]?.environment?.['HOSTED_URL']).toMatch(
        /^\$\{HOSTED_URL:-https?:\/\/[^/]+\/hosted\}$/,
      );
      const config = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', `${app}.yaml`), 'utf8'))
        .map((d) => d.toJSON() as { kind: string; data?: Record<string, string> })
        .find((d) => d.kind === 'ConfigMap');
      expect(config?.data?.['HOSTED_URL']).toMatch(/^https:\/\/[^/]+\/hosted$/);
    }
  });

  it('the gateway believes the ingress about the client address (TRUST_PROXY), so limits count per client', () => {
    // Without it every request's source is the ingress pod: one guesser would spend the failed-authentication
    // budget of every client, and the per-source limit would be shared by all of them.
    const config = k8sDocs('gateway.yaml').find((d) => d.kind === 'ConfigMap');
    const trustProxy = trustProxyFromEnv({ TRUST_PROXY: config?.data?.['TRUST_PROXY'] });
    expect(trustProxy).toBeDefined();
    expect(trustProxy).not.toEqual([]);
  });

  it.each(apps)(
    'Kubernetes gives %s a grace period longer than its stop deadline (shutdown delay + request deadline + margin)',
    (app) => {
      const docs = k8sDocs(`${app}.yaml`);
      const env = docs.find((d) => d.kind === 'ConfigMap')?.data ?? {};
      const graceSeconds = (
        docs.find((d) => d.kind === 'Deployment')?.spec?.template?.spec as
          { terminationGracePeriodSeconds?: number } | undefined
      )?.terminationGracePeriodSeconds;
      // Kubernetes' default grace period is 30 s.
      expect((graceSeconds ?? 30) * 1000).toBeGreaterThan(
        stopDeadlineMs(httpTimeoutsFromEnv(env), shutdownDelayMsFromEnv(env)),
      );
    },
  );

  it('the gateway stays in service, not ready, while the ingress drops it (SHUTDOWN_DELAY_MS)', () => {
    const env = k8sDocs('gateway.yaml').find((d) => d.kind === 'ConfigMap')?.data ?? {};
    expect(shutdownDelayMsFromEnv(env)).toBeGreaterThanOrEqual(1000);
  });

  it('the Dockerfile builds any one service and checks its health', () => {
    const dockerfile = readFileSync(join(root, 'deploy', 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/ARG SERVICE/);
    expect(dockerfile).toMatch(/HEALTHCHECK[\s\S]*\/health/);
    expect(dockerfile).toMatch(/apps\/\$\{SERVICE\}\/src\/main\.ts/);
    expect(dockerfile).not.toMatch(/^RUN[^\n]*npm ci/m);
  });

  it('every service runs with the young generation the write path was measured with, and node accepts it', () => {
    const dockerfile = readFileSync(join(root, 'deploy', 'Dockerfile'), 'utf8');
    const nodeOptions = /^ENV NODE_OPTIONS=(\S+)$/m.exec(dockerfile)?.[1];
    expect(nodeOptions).toBe('--max-semi-space-size=32');
    // node refuses to start on a V8 flag NODE_OPTIONS does not allow (--min-semi-space-size is one).
    expect(() =>
      execFileSync(process.execPath, ['-e', '0'], { env: { ...process.env, NODE_OPTIONS: nodeOptions } }),
    ).not.toThrow();
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: { start: string };
    };
    expect(pkg.scripts.start).toContain(nodeOptions);
  });

  const kustomization = parse(readFileSync(join(root, 'deploy', 'k8s', 'kustomization.yaml'), 'utf8')) as {
    resources: string[];
  };

  it.each(apps)(
    'Kubernetes has a Deployment, Service and ConfigMap for %s with liveness and readiness probes',
    (app) => {
      expect(kustomization.resources).toContain(`${app}.yaml`);
      const docs = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', `${app}.yaml`), 'utf8')).map(
        (d) => d.toJSON() as { kind: string; metadata: { name: string }; spec?: Record<string, unknown> },
      );
      const kinds = Object.fromEntries(docs.map((d) => [d.kind, d]));
      expect(Object.keys(kinds).sort()).toEqual(['ConfigMap', 'Deployment', 'Service']);
      const container = (
        kinds['Deployment']?.spec as {
          template: {
            spec: { containers: Array<Record<string, { httpGet: { path: string } }> & { image: string }> };
          };
        }
      ).template.spec.containers[0];
      expect(container?.['livenessProbe']?.httpGet.path).toBe('/health');
      expect(container?.['readinessProbe']?.httpGet.path).toBe('/ready');
      expect(container?.image).toBe(`stablepay/${app}:latest`);
    },
  );

  // The HTTP server listens once the start's migrations ran: a wait for the migration lock and the migrations count
  // against the startup probe, and a probe restart of the migrating holder rolls its migration back, in a loop.
  const STARTUP_BUDGET_SECONDS = 30 * 60;
  it.each(apps)(
    `Kubernetes gives %s's start ${STARTUP_BUDGET_SECONDS / 60} minutes (migration lock waits and migrations) before a restart`,
    (app) => {
      const deployment = parseAllDocuments(readFileSync(join(root, 'deploy', 'k8s', `${app}.yaml`), 'utf8'))
        .map((d) => d.toJSON() as { kind: string; spec?: Record<string, unknown> })
        .find((d) => d.kind === 'Deployment');
      const probe = (
        deployment?.spec as {
          template: {
            spec: {
              containers: Array<{ startupProbe?: { periodSeconds?: number; failureThreshold?: number } }>;
            };
          };
        }
      ).template.spec.containers[0]?.startupProbe;
      // Kubernetes' defaults: every 10 s, 3 failures.
      expect((probe?.periodSeconds ?? 10) * (probe?.failureThreshold ?? 3)).toBeGreaterThanOrEqual(
        STARTUP_BUDGET_SECONDS,
      );
    },
  );

  describe('metrics scraping (deploy/monitoring)', () => {
    const monitoring = (file: string) =>
      parse(readFileSync(join(root, 'deploy', 'monitoring', file), 'utf8')) as Record<string, unknown>;
    const podMonitor = monitoring('podmonitor.yaml') as {
      kind: string;
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: Array<{ port: string; path: string }>;
      };
    };
    const scrape = monitoring('prometheus-scrape.yaml') as {
      scrape_configs: Array<{
        metrics_path: string;
        relabel_configs: Array<{ source_labels: string[]; regex?: string; action?: string }>;
      }>;
    };
    const keeps = (label: string) =>
      scrape.scrape_configs[0]?.relabel_configs.find(
        (r) => r.action === 'keep' && r.source_labels.includes(label),
      )?.regex;

    it.each(apps)(
      '%s serves /metrics on a port of its own that both the PodMonitor and the plain scrape config select',
      (app) => {
        const docs = k8sDocs(`${app}.yaml`);
        const metricsPort = docs.find((d) => d.kind === 'ConfigMap')?.data?.['METRICS_PORT'];
        const template = (
          docs.find((d) => d.kind === 'Deployment')?.spec as unknown as {
            template: {
              metadata: { labels: Record<string, string> };
              spec: { containers: Array<{ ports: Array<{ name: string; containerPort: number }> }> };
            };
          }
        ).template;
        const ports = template.spec.containers[0]?.ports ?? [];
        // The API port answers /metrics 404 once METRICS_PORT is set: the scrape must name the metrics port.
        expect(ports.find((p) => p.name === 'metrics')?.containerPort).toBe(Number(metricsPort));
        expect(ports.find((p) => p.name === 'http')?.containerPort).not.toBe(Number(metricsPort));
        for (const [label, value] of Object.entries(podMonitor.spec.selector.matchLabels))
          expect(template.metadata.labels[label]).toBe(value);
        expect(template.metadata.labels['app.kubernetes.io/part-of']).toMatch(
          new RegExp(`^${keeps('__meta_kubernetes_pod_label_app_kubernetes_io_part_of')}$`),
        );
      },
    );

    it('both scrape the metrics port at /metrics', () => {
      expect(podMonitor.kind).toBe('PodMonitor');
      expect(podMonitor.spec.podMetricsEndpoints).toEqual([
        expect.objectContaining({ port: 'metrics', path: '/metrics' }),
      ]);
      expect(scrape.scrape_configs[0]?.metrics_path).toBe('/metrics');
      expect(keeps('__meta_kubernetes_pod_container_port_name')).toBe('metrics');
    });
  });

  describe('the chain layer (docs/chain-operator.md)', () => {
    it('payments, payouts (the deposit sweep) and subscriptions send transactions (their main.ts reads the chain layer with the key)', () => {
      expect(actsOnChain).toEqual(['payments', 'payouts', 'subscriptions']);
    });

    it.each(actsOnChain)(
      'docker-compose gives %s the chain layer, its operator key and a registry admin, after the contracts job',
      (app) => {
        const env = compose.services[app]?.environment ?? {};
        for (const name of [...CHAIN_ENV, 'OPERATOR_PRIVATE_KEY', 'REGISTRY_ADMIN_ADDRESS'])
          expect(env[name]).toBeTruthy();
        // Required interpolations: compose refuses to start without them instead of a service exiting later.
        expect(env['OPERATOR_PRIVATE_KEY']).toMatch(/^\$\{OPERATOR_PRIVATE_KEY:\?/);
        expect(env['REGISTRY_ADMIN_ADDRESS']).toMatch(/^\$\{REGISTRY_ADMIN_ADDRESS:\?/);
        expect(compose.services[app]?.depends_on?.['contracts']).toEqual({
          condition: 'service_completed_successfully',
        });
      },
    );

    it('docker-compose: only the services that send transactions (and the contracts job) hold the operator key', () => {
      const holders = Object.entries(compose.services)
        .filter(([, s]) => s.environment?.['OPERATOR_PRIVATE_KEY'] !== undefined)
        .map(([name]) => name)
        .sort();
      expect(holders).toEqual(['contracts', ...actsOnChain].sort());
      // Keyless reads of the chains (subscription options and chain time in the gateway, the indexer's followers).
      for (const app of ['gateway', 'indexer']) {
        for (const name of CHAIN_ENV) expect(compose.services[app]?.environment?.[name]).toBeTruthy();
      }
    });

    it('docker-compose gives the gateway the public roles the key holders and the contracts job read, and no hand-copied address', () => {
      const gateway = compose.services['gateway']?.environment ?? {};
      for (const name of PUBLIC_ROLES) {
        // Required: without them GET /settings would show no registry_address and no payment factory.
        expect(gateway[name]).toMatch(new RegExp(`^\\$\\{${name}:\\?`));
        for (const app of [...actsOnChain, 'contracts'])
          expect({ app, name, value: compose.services[app]?.environment?.[name] }).toEqual({
            app,
            name,
            value: gateway[name],
          });
      }
      // A fixed registry would go stale with the roles (the payments service verifies MerchantChange against the
      // computed one); the payment factory's override is the payments service's own.
      expect(gateway['REGISTRY_ADDRESS']).toBeUndefined();
      expect(gateway['PAYMENT_FACTORY_ADDRESS']).toBe(
        compose.services['payments']?.environment?.['PAYMENT_FACTORY_ADDRESS'],
      );
      expect(readFileSync(join(root, 'apps', 'gateway', 'src', 'main.ts'), 'utf8')).toMatch(
        /requireContractAddresses: true/,
      );
    });

    it('docker-compose gives payouts an off-ramp address by default (without one POST /customers answers 503)', () => {
      const env = compose.services['payouts']?.environment ?? {};
      const [, fallback] =
        /^\$\{PAYOUT_OFF_RAMP_ADDRESS:-(0x[0-9a-fA-F]{40})\}$/.exec(env['PAYOUT_OFF_RAMP_ADDRESS'] ?? '') ??
        [];
      expect(fallback).toBeDefined();
      expect(BigInt(fallback as string)).not.toBe(0n);
      // The sweep to it needs the operator key: the payouts process holds it (checked above).
      expect(env['OPERATOR_PRIVATE_KEY']).toMatch(/^\$\{OPERATOR_PRIVATE_KEY:\?/);
    });

    it("docker-compose's one-shot contracts job deploys to the compose anvil with the services' roles", () => {
      const job = compose.services['contracts'];
      expect(job?.command?.join(' ')).toContain('tools/local-chains/deploy.ts');
      expect(existsSync(join(root, 'tools', 'local-chains', 'deploy.ts'))).toBe(true);
      expect(job?.restart).toBe('no');
      expect(job?.depends_on?.['anvil']).toEqual({ condition: 'service_healthy' });
      const services = compose.services['subscriptions']?.environment ?? {};
      // The same roles and chains as the services: the contract addresses they compute are the ones deployed.
      for (const name of [
        'CHAIN_RPC_URLS',
        'CHAIN_MODE',
        'OPERATOR_PRIVATE_KEY',
        'REGISTRY_ADMIN_ADDRESS',
        'OPERATOR_PAUSER_ADDRESS',
      ]) {
        expect(job?.environment?.[name]).toBe(services[name]);
      }
      expect(job?.environment?.['DEPLOYER_PRIVATE_KEY']).toMatch(/^0x[0-9a-f]{64}$/);
      // The chain the services are pointed at is the compose anvil, with the chain id it runs.
      const anvil = compose.services['anvil']?.entrypoint ?? [];
      const chainId = anvil[anvil.indexOf('--chain-id') + 1];
      expect(services['CHAIN_RPC_URLS']).toBe(`eip155:${chainId}=http://anvil:8545`);
      expect(readFileSync(join(root, 'deploy', 'Dockerfile'), 'utf8')).toMatch(
        /^COPY tools\/local-chains \.\/tools\/local-chains$/m,
      );
    });

    it.each(actsOnChain)(
      'Kubernetes mounts the operator key into %s from a Secret of its own, with the chain ConfigMap',
      (app) => {
        const container = containerOf(app);
        const key = container?.env?.find((e) => e.name === 'OPERATOR_PRIVATE_KEY');
        expect(key?.value).toBeUndefined();
        expect(key?.valueFrom?.secretKeyRef).toEqual({
          name: 'stablepay-operator',
          key: 'OPERATOR_PRIVATE_KEY',
        });
        expect(container?.envFrom).toContainEqual({ configMapRef: { name: 'stablepay-chain' } });
      },
    );

    it('Kubernetes: no other service can read the operator key, and no ConfigMap holds it', () => {
      for (const app of apps.filter((a) => !actsOnChain.includes(a))) {
        const container = containerOf(app);
        expect(JSON.stringify(container)).not.toContain('stablepay-operator');
        expect(container?.env?.map((e) => e.name) ?? []).not.toContain('OPERATOR_PRIVATE_KEY');
      }
      const files = readdirSync(join(root, 'deploy', 'k8s')).filter(
        (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
      );
      for (const file of files) {
        for (const doc of k8sDocs(file).filter((d) => d.kind === 'ConfigMap')) {
          expect(Object.keys(doc.data ?? {})).not.toContain('OPERATOR_PRIVATE_KEY');
        }
      }
    });

    it('Kubernetes: the chain ConfigMap names the public roles, listed by the kustomization and loaded by the chain readers', () => {
      expect(kustomization.resources).toContain('chain.yaml');
      const chain = k8sDocs('chain.yaml').find((d) => d.kind === 'ConfigMap');
      expect(chain?.metadata.name).toBe('stablepay-chain');
      expect(Object.keys(chain?.data ?? {})).toEqual(
        expect.arrayContaining([
          'CHAIN_MODE',
          'CHAIN_CONFIRMATIONS',
          ...PUBLIC_ROLES,
          'PAYMENT_FACTORY_ADDRESS',
        ]),
      );
      for (const app of ['gateway', 'indexer', ...actsOnChain]) {
        expect(containerOf(app)?.envFrom).toContainEqual({ configMapRef: { name: 'stablepay-chain' } });
      }
    });
  });

  it('Kubernetes: the gateway reads the roles and the payment factory override from the chain ConfigMap only', () => {
    // The key holders load the same ConfigMap: what the gateway computes is what they compute and sign for.
    for (const app of ['gateway', ...actsOnChain]) {
      expect(containerOf(app)?.envFrom).toContainEqual({ configMapRef: { name: 'stablepay-chain' } });
      const own = k8sDocs(`${app}.yaml`).find((d) => d.kind === 'ConfigMap')?.data ?? {};
      for (const name of [...PUBLIC_ROLES, 'REGISTRY_ADDRESS', 'PAYMENT_FACTORY_ADDRESS'])
        expect({ app, defines: name in own ? name : null }).toEqual({ app, defines: null });
    }
  });

  describe('alerting rules (deploy/monitoring/prometheus-rules.yaml)', () => {
    const rules = parse(
      readFileSync(join(root, 'deploy', 'monitoring', 'prometheus-rules.yaml'), 'utf8'),
    ) as {
      groups: Array<{
        name: string;
        rules: Array<{ alert: string; expr: string; labels?: { severity?: string } }>;
      }>;
    };
    const all = rules.groups.flatMap((g) => g.rules);

    /** Every metric name the services register, from the source (a `name: 'stablepay_...'` or a `const name =`). */
    const registered = (() => {
      const names = new Set<string>();
      const walk = (dir: string): void => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const path = join(dir, entry.name);
          if (entry.isDirectory()) {
            if (entry.name !== 'node_modules') walk(path);
          } else if (entry.name.endsWith('.ts') && !/\.spec\.ts$/.test(entry.name)) {
            for (const m of readFileSync(path, 'utf8').matchAll(/'(stablepay_[a-z0-9_]+)'/g))
              names.add(m[1] as string);
          }
        }
      };
      walk(join(root, 'libs'));
      return names;
    })();

    it('names a severity for each alert and only metrics the services register', () => {
      expect(all.length).toBeGreaterThan(0);
      for (const rule of all) {
        expect({ alert: rule.alert, severity: rule.labels?.severity }).toEqual({
          alert: rule.alert,
          severity: expect.stringMatching(/^(page|warn)$/),
        });
        for (const [used] of rule.expr.matchAll(/stablepay_[a-z0-9_]+/g)) {
          const base = used.replace(/_(bucket|count|sum)$/, '');
          expect({ alert: rule.alert, metric: base, registered: registered.has(base) }).toEqual({
            alert: rule.alert,
            metric: base,
            registered: true,
          });
        }
      }
    });

    it('alerts on the payout failures the code only logs and counts (failed sweeps, a deposit retracted after the forward)', () => {
      const alerting = (metric: RegExp) =>
        all.filter((rule) => metric.test(rule.expr)).map((rule) => rule.alert);
      expect(alerting(/stablepay_payout_sweeps_total\{outcome="failed"\}/)).toEqual([
        'StablepayPayoutSweepsFailing',
      ]);
      expect(alerting(/stablepay_payout_deposit_retracted_after_forward_total\b/)).toEqual([
        'StablepayPayoutDepositRetractedAfterForward',
      ]);
    });
  });
});
