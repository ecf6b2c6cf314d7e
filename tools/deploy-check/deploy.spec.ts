import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

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
}

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
    for (const owner of ['payments', 'subscriptions', 'webhook-dispatch']) {
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

  it('the Dockerfile builds any one service and checks its health', () => {
    const dockerfile = readFileSync(join(root, 'deploy', 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/ARG SERVICE/);
    expect(dockerfile).toMatch(/HEALTHCHECK[\s\S]*\/health/);
    expect(dockerfile).toMatch(/apps\/\$\{SERVICE\}\/src\/main\.ts/);
    expect(dockerfile).not.toMatch(/^RUN[^\n]*npm ci/m);
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
});
