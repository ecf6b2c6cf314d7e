import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  HttpCode,
  Inject,
  Injectable,
  Param,
  Post,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DataSource } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import {
  type ConsumerRetryOutcome,
  EVENT_BUS,
  type EventBus,
  listParkedStreams,
  type ParkedStream,
  requestParkedStreamRetry,
  SupervisedEventBus,
} from '@stablepay/event-bus';
import { timingSafeEqual, createHash } from 'node:crypto';
import {
  admitKeyLookup,
  ambiguousCredentials,
  AnswersSecret,
  idempotencyClaimedAtOf,
  idempotencyKeyOf,
  presentedKeyHash,
  Public,
  unauthenticated,
} from '@stablepay/http';
import { DomainError, validationError } from '@stablepay/util';
import { MERCHANTS_ADMIN_TOKEN, MERCHANTS_USE_CASES, type MerchantsUseCases } from './merchants.port';
import { CreateMerchantDto } from './settings.dto';

/** Operator API: absent (404) unless ADMIN_TOKEN is set; then `Authorization: Bearer <ADMIN_TOKEN>`. */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  constructor(@Inject(MERCHANTS_ADMIN_TOKEN) private readonly token: string | null) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const token = this.token;
    if (!token) {
      throw new DomainError({
        type: 'invalid_request',
        status: 404,
        code: 'route_not_found',
        message: 'Unrecognized request URL.',
      });
    }
    const http = context.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const ambiguous = ambiguousCredentials(request.raw);
    if (ambiguous) throw unauthenticated(ambiguous);
    const header = request.headers['authorization'] ?? '';
    const given = /^Bearer\s+(\S+)$/i.exec(header)?.[1] ?? '';
    // Admitted as an API key lookup is: a source locked out by its failed authentications gets 429 before the
    // comparison, so its guesses cannot tell the right token (200) from a wrong one (429).
    const settle = await admitKeyLookup(
      request,
      http.getResponse<FastifyReply>(),
      presentedKeyHash(request, given),
    );
    const digest = (s: string) => createHash('sha256').update(s).digest();
    const valid = timingSafeEqual(digest(given), digest(token));
    settle(valid);
    if (!valid) throw unauthenticated('Invalid admin token.');
    return true;
  }
}

@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class AdminController {
  constructor(
    @Inject(MERCHANTS_USE_CASES) private readonly merchants: MerchantsUseCases,
    // The parked-stream routes are the platform's operator API (every projection's table in this database),
    // not a merchant use case: they read the platform's tables directly.
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
  ) {}

  /** Streams a projection parked on an event it could not apply (every projection sharing this database). */
  @Get('parked-streams')
  async parkedStreams() {
    const parked = await listParkedStreams(this.dataSource);
    return { object: 'list' as const, data: parked.map(parkedStreamJson), has_more: false };
  }

  /**
   * Retries a parked stream once its cause is fixed. `projection` is a projection or a bus consumer group (both
   * park in `parked_streams`). Run at once when it runs in this process (200, `applied` or `still_parked` with the
   * new error); otherwise, or when this process could not run it to its end (another member of the group retries
   * the stream, or this one is stopping), the request is on the row for the member that runs the stream's next
   * retry, within a second (202, `requested`): never answered as if it had run. The `parked_streams` row decides,
   * whichever process parked the stream and whichever mechanism serves it: 404 `not_parked` when there is none as
   * the request arrives; 202 only while it exists with the request on it (asking again is 202 again); 200 `applied`
   * also when another retry released the stream while this request waited for it.
   */
  @Post('projections/:projection/parked-streams/:streamId/retry')
  async retryParkedStream(
    @Param('projection') projection: string,
    @Param('streamId') streamId: string,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const runner =
      this.projections.registry.get(projection) ??
      (this.bus instanceof SupervisedEventBus ? this.bus.consumer(projection) : undefined);
    const outcome = runner
      ? await this.retryHere(runner, projection, streamId)
      : (await requestParkedStreamRetry(this.dataSource, projection, streamId))
        ? 'requested'
        : 'not_parked';
    if (outcome === 'not_parked') {
      throw new DomainError({
        type: 'invalid_request',
        status: 404,
        code: 'not_parked',
        message: `No stream ${streamId} is parked by projection or consumer group ${projection}.`,
      });
    }
    void reply.status(outcome === 'requested' ? 202 : 200);
    const still = (await listParkedStreams(this.dataSource, projection)).find((p) => p.streamId === streamId);
    return {
      object: 'parked_stream_retry' as const,
      projection,
      stream_id: streamId,
      status: outcome,
      parked_stream: still ? parkedStreamJson(still) : null,
    };
  }

  /**
   * A retry run in this process that throws (the event store or the database failing, not one of the stream's
   * events) leaves the request on the row and answers `requested`: the retry poll of the process running the
   * projection or group serves it, putting it off with back-off while it keeps failing. An error the request
   * cannot be recorded after (the database away) is answered as it is.
   */
  private async retryHere(
    runner: { retry(streamId: string): Promise<ConsumerRetryOutcome> },
    projection: string,
    streamId: string,
  ): Promise<ConsumerRetryOutcome> {
    try {
      return await runner.retry(streamId);
    } catch (error) {
      if (await requestParkedStreamRetry(this.dataSource, projection, streamId)) return 'requested';
      throw error;
    }
  }

  /**
   * Turns beta features on or off for a merchant (SPEC Payouts (beta): "must be enabled per account"): body
   * `{ "payouts": true }`; only the named features change. Unknown features are refused (400 unknown_parameter).
   */
  @Post('merchants/:merchantId/beta-features')
  @HttpCode(200)
  setBetaFeatures(@Param('merchantId') merchantId: string, @Body() body: unknown) {
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw validationError('payouts', 'The body must be an object such as {"payouts": true}.');
    return this.merchants.setBetaFeatures(merchantId, body as Record<string, unknown>);
  }

  /**
   * Creates a merchant; its secret API key is returned here once and never again. A keyed retry whose first attempt
   * created the merchant but lost its answer is answered that merchant with a new key replacing the unseen one.
   */
  @Post('merchants')
  @HttpCode(201)
  @AnswersSecret()
  createMerchant(@Body() body: CreateMerchantDto, @Req() request: FastifyRequest) {
    const commandId = idempotencyKeyOf(request);
    const claimedAt = idempotencyClaimedAtOf(request);
    return this.merchants.createMerchant({
      name: body.name,
      mode: body.mode,
      settlementMode: body.settlement_mode ?? 'crypto',
      ...(commandId !== undefined ? { commandId } : {}),
      ...(claimedAt !== undefined ? { attemptStartedAt: claimedAt.toISOString() } : {}),
    });
  }
}

function parkedStreamJson(p: ParkedStream) {
  return {
    object: 'parked_stream' as const,
    projection: p.projection,
    stream_id: p.streamId,
    source_stream_id: p.sourceStreamId,
    event_id: p.eventId,
    revision: p.revision,
    event_type: p.eventType,
    error: p.error,
    parked_at: p.parkedAt,
    attempts: p.attempts,
    waiting_revision: p.waitingRevision,
    retry_requested_at: p.retryRequestedAt,
  };
}
