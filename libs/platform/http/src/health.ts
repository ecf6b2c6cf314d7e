import { Controller, Get, Injectable, Module, Res, Global, Header } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { register } from 'prom-client';
import { Public } from './auth';
import { IgnoreQueryParameters } from './query-parameters';

/**
 * Throws (or rejects) when the dependency cannot serve traffic. Resolving with a text means "ready, but
 * degraded": the text is reported as the check's detail and the process stays ready.
 */
export type ReadinessCheck = () => Promise<void | string>;

/** Modules register what they need to serve traffic (database, event store, chains); /ready runs them all. */
@Injectable()
export class ReadinessRegistry {
  private readonly checks = new Map<string, ReadinessCheck>();
  private stopping = false;

  register(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** From the stop signal on, the process is not ready, whatever its dependencies say: balancers move away. */
  markStopping(): void {
    this.stopping = true;
  }

  async run(timeoutMs = 2000): Promise<{ ready: boolean; checks: Record<string, string> }> {
    if (this.stopping) return { ready: false, checks: { shutdown: 'stopping' } };
    const results: Record<string, string> = {};
    const failed = new Set<string>();
    await Promise.all(
      [...this.checks].map(async ([name, check]) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          const detail = await Promise.race([
            check(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
          results[name] = typeof detail === 'string' && detail !== '' ? `degraded: ${detail}` : 'ok';
        } catch (error) {
          failed.add(name);
          results[name] = error instanceof Error ? error.message : String(error);
        } finally {
          if (timer) clearTimeout(timer);
        }
      }),
    );
    return { ready: failed.size === 0, checks: results };
  }
}

@Public()
@IgnoreQueryParameters()
@Controller()
export class HealthController {
  constructor(private readonly registry: ReadinessRegistry) {}

  /** Liveness: the process answers. Never touches dependencies, so a slow database does not get us killed. */
  @Get('health')
  health(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /** Readiness: every dependency answered; 503 otherwise so load balancers stop sending traffic. */
  @Get('ready')
  async ready(
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<{ status: string; checks: Record<string, string> }> {
    const result = await this.registry.run();
    void reply.status(result.ready ? 200 : 503);
    return { status: result.ready ? 'ready' : 'not_ready', checks: result.checks };
  }
}

/**
 * Prometheus metrics of this process (prom-client's default registry: projection lag, parked streams, batch
 * sizes...). Public like /health: it carries counts and names of components, never merchant data. With METRICS_PORT
 * the same registry is served on its own listener instead (`startMetricsServer`) and this route answers 404.
 */
@Public()
@IgnoreQueryParameters()
@Controller()
export class MetricsController {
  @Get('metrics')
  @Header('Content-Type', register.contentType)
  @Header('Cache-Control', 'no-store')
  async metrics(): Promise<string> {
    return register.metrics();
  }
}

@Global()
@Module({
  controllers: [HealthController, MetricsController],
  providers: [ReadinessRegistry],
  exports: [ReadinessRegistry],
})
export class HealthModule {}
