import { Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { admitInFlight, InFlightLimit, sourceBudget } from '@stablepay/http';

/**
 * Reports of a subscribe transaction in flight at once, per gateway process. A report is public (the intent id is
 * the capability), a made-up hash is free, and each report holds RPC calls for up to 5 s (an unseen hash: about 12
 * calls) or 30 s (a known, unmined one: a lookup every 200 ms). A page reports its one transaction once (twice if
 * reloaded meanwhile); a source is a browser, or a few behind one NAT.
 */
export const SUBSCRIBE_REPORTS_IN_FLIGHT = { perIntent: 2, perSource: 8 } as const;

/** A slot frees when a report ends: an unseen hash within about 5 s. */
export const SUBSCRIBE_REPORT_RETRY_AFTER_MS = 5_000;

/** Admits a subscribe report against the per-source and per-intent bounds, or 429 `rate_limited` with Retry-After. */
@Injectable()
export class SubscribeReportLimits {
  private readonly perSource = new InFlightLimit(
    'subscribe_reports_per_source',
    SUBSCRIBE_REPORTS_IN_FLIGHT.perSource,
  );
  private readonly perIntent = new InFlightLimit(
    'subscribe_reports_per_intent',
    SUBSCRIBE_REPORTS_IN_FLIGHT.perIntent,
  );

  /** Resolves to the release to call once the report has been answered. */
  admit(request: FastifyRequest, reply: FastifyReply, checkoutId: string): Promise<() => Promise<void>> {
    return admitInFlight(
      request,
      reply,
      [
        {
          limit: this.perSource,
          key: sourceBudget(request.ip),
          message: `Too many subscribe transactions being checked from this address (at most ${SUBSCRIBE_REPORTS_IN_FLIGHT.perSource} at once). Retry later.`,
        },
        {
          limit: this.perIntent,
          key: checkoutId,
          message: `Too many reports of this subscription checkout's transaction being checked (at most ${SUBSCRIBE_REPORTS_IN_FLIGHT.perIntent} at once). Retry later.`,
        },
      ],
      SUBSCRIBE_REPORT_RETRY_AFTER_MS,
    );
  }
}
