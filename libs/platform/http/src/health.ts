import { Controller, Get, Injectable, Module, Res, Global } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Public } from './auth';

export type ReadinessCheck = () => Promise<void>;

/** Modules register what they need to serve traffic (database, event store, chains); /ready runs them all. */
@Injectable()
export class ReadinessRegistry {
  private readonly checks = new Map<string, ReadinessCheck>();

  register(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  async run(timeoutMs = 2000): Promise<{ ready: boolean; checks: Record<string, string> }> {
    const results: Record<string, string> = {};
    await Promise.all(
      [...this.checks].map(async ([name, check]) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            check(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
          results[name] = 'ok';
        } catch (error) {
          results[name] = error instanceof Error ? error.message : String(error);
        } finally {
          if (timer) clearTimeout(timer);
        }
      }),
    );
    return { ready: Object.values(results).every((r) => r === 'ok'), checks: results };
  }
}

@Public()
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

@Global()
@Module({ controllers: [HealthController], providers: [ReadinessRegistry], exports: [ReadinessRegistry] })
export class HealthModule {}
