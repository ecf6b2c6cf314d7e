import {
  type CallHandler,
  type ContextType,
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type NestInterceptor,
  type OnModuleDestroy,
  Optional,
  SetMetadata,
} from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createHash, randomUUID } from 'node:crypto';
import { from, lastValueFrom, type Observable } from 'rxjs';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { PooledStatements } from '@stablepay/node-util';
import {
  type Clock,
  DAY,
  DomainError,
  conflict,
  invalidRequest,
  type SecretBox,
  SecretUnreadableError,
  systemClock,
} from '@stablepay/util';
import { toEnvelope } from './error-envelope.filter';
import { IDLE_FOR, type IdleAware } from './idle-interceptors';
import type { AuthenticatedMerchant } from './auth';
import {
  checkedIdempotencyKey,
  IDEMPOTENCY_CLAIMED_AT,
  IDEMPOTENCY_COMMAND_ID,
  IDEMPOTENCY_NOT_FINAL,
  idempotencyCommandId,
} from './request-origin';

export class CreateIdempotencyKeys1763800000000 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE idempotency_keys (
      scope text NOT NULL,
      key text NOT NULL,
      request_hash text NOT NULL,
      state text NOT NULL CHECK (state IN ('in_flight', 'done')),
      response_status integer,
      -- text, not jsonb: a replay must be byte-identical to the first response (jsonb reorders keys).
      response_body text,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (scope, key)
    )`);
    await q.query('CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE idempotency_keys');
  }
}

/**
 * Who holds an in-flight claim: each process running the interceptor beats in `idempotency_owners` while it lives,
 * and its claims name it, so a retry can tell a first request still running from one whose process died.
 */
export class AddIdempotencyClaimOwners1795449600777 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    // Every service applies the platform's migrations at its start, unlocked: pods started together run this at
    // once, and the second must find the first's work done, not fail (and crash-loop the rollout).
    await q.query('ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS owner text');
    await q.query(`CREATE TABLE IF NOT EXISTS idempotency_owners (
      owner text PRIMARY KEY,
      beat_at timestamptz NOT NULL
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS idempotency_owners');
    await q.query('ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS owner');
  }
}

/**
 * A key's generation: the keyed requests of one key within its 24 hours are one generation, and a key used again
 * after them starts the next (Stripe: a key reused after it was pruned makes a new request). Creates, charges and
 * payment actions derive their ids from the request's command id (`idempotencyKeyOf`), which names the generation,
 * so a key reused after 24 hours makes a new checkout, refund or charge instead of answering the one the key made
 * before as if new (201, no Idempotent-Replayed). A released key (a 5xx, 409, 429 or validation error) is kept as a
 * `released` row, not deleted, so its retry stays in its generation and still finds what a lost answer saved.
 * Rows from before have generation 1, whose command id is the key itself (as before).
 */
export class AddIdempotencyKeyGenerations1795536000300 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    // Idempotent, as every platform migration: pods started together run it at once (each in its transaction, so
    // the second's DROP waits for the first's commit and replaces its constraint with the same one).
    await q.query(
      'ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS generation integer NOT NULL DEFAULT 1',
    );
    await q.query('ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_state_check');
    // NOT VALID: adding a CHECK scans the table under the ACCESS EXCLUSIVE lock ALTER TABLE holds until this
    // migration commits, and every keyed POST claims a row of this table (before pruning it held every key ever
    // used); ValidateIdempotencyKeyStateCheck1795795200700 scans it in its own transaction under a lock that lets
    // claims through. Rows written meanwhile are checked as they are written. Databases that ran this before it said
    // NOT VALID have the constraint validated already; the validation then finds nothing to do.
    await q.query(`ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check
      CHECK (state IN ('in_flight', 'done', 'released')) NOT VALID`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM idempotency_keys WHERE state = 'released'`);
    await q.query('ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_state_check');
    await q.query(`ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check
      CHECK (state IN ('in_flight', 'done'))`);
    await q.query('ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS generation');
  }
}

/**
 * A redirect's kept answer keeps its `Location`: the hosted pages' form posts answer 303 with it, and a replay
 * without it sent the browser nowhere.
 */
export class AddIdempotencyResponseLocation1795536000400 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS response_location text');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS response_location');
  }
}

/**
 * Rows can be pruned (IdempotencyKeyPruner) once a generation's number no longer depends on the row. A counter did:
 * with the row gone, the key's next claim inserted generation 1 again, whose command id (the key itself) names the
 * object the key made first, so yesterday's checkout was answered as a fresh 201 and a refund or charge did nothing.
 * A generation is now the minute it started (minutes since 1970, `generationOf`), and a takeover moves it to at least
 * one past the last: a key's generations are at least its 24 hours apart, so the minute is new for the key with or
 * without the row, and no history is kept. The column default is the same minute by the database's clock for the
 * claims of the version before (a rolling deploy), which insert without naming it and read it back: a key they
 * claim after a prune gets a new id from them too. Rows already there keep their generation, and so their ids (1:
 * the key itself). Released rows of the version before (`created_at` -infinity, their claim time unknown) are
 * given the migration's time, so they are pruned one retention after it.
 */
export class TimeIdempotencyKeyGenerations1795622400500 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys ALTER COLUMN generation SET DEFAULT ${GENERATION_NOW_SQL}`);
    // The created_at index finds them (-infinity), not a scan of the table.
    await q.query(
      `UPDATE idempotency_keys SET created_at = now() - interval '${RELEASED_SHIFT}'
        WHERE created_at = '-infinity' AND state = 'released'`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `UPDATE idempotency_keys SET created_at = '-infinity' WHERE state = 'released' AND created_at > '-infinity'`,
    );
    await q.query('ALTER TABLE idempotency_keys ALTER COLUMN generation SET DEFAULT 1');
  }
}

/**
 * A key released after a 5xx is kept for the request that released it (`claimable_by`, its request hash). A 5xx may
 * come after the request's effect was saved (a command timeout after the owner's append), and payment actions,
 * charges and creates answer what their command id already saved: a retry with other parameters that claimed the
 * released key ran under the same command id and was answered the first request's outcome (a refund answered with
 * the capture the key started), its own parameters ignored. Such a retry is now refused as against a kept answer
 * (400 `idempotency_key_reused`). NULL: claimable by any request, as every released row was before (a validation
 * error, 401, 409 or 429 saved nothing; rows released by gateways of the version before). Nullable without a default,
 * so adding it rewrites nothing and holds the table's lock only for the catalog change.
 */
export class BindServerErrorReleases1795795200600 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS claimable_by text');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS claimable_by');
  }
}

/**
 * Validates the state check AddIdempotencyKeyGenerations1795536000300 adds NOT VALID: the scan of the table runs
 * here, in this migration's own transaction, holding SHARE UPDATE EXCLUSIVE, which lets claims and completions (and
 * the pruner) through; only another validation or schema change waits. Already valid (a database that ran the
 * earlier text of that migration): nothing to scan. Pods running it at once: the second waits for the first, then
 * finds it valid.
 */
export class ValidateIdempotencyKeyStateCheck1795795200700 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_state_check');
  }
  async down(): Promise<void> {
    // A validated constraint is what the earlier text of AddIdempotencyKeyGenerations1795536000300 left too.
  }
}

/** The idempotency_keys schema, in order (every service applies them at its start). */
export const IDEMPOTENCY_MIGRATIONS = [
  CreateIdempotencyKeys1763800000000,
  AddIdempotencyClaimOwners1795449600777,
  AddIdempotencyKeyGenerations1795536000300,
  AddIdempotencyResponseLocation1795536000400,
  TimeIdempotencyKeyGenerations1795622400500,
  BindServerErrorReleases1795795200600,
  ValidateIdempotencyKeyStateCheck1795795200700,
];

export const IDEMPOTENCY_CLOCK = Symbol('IDEMPOTENCY_CLOCK');
/** The SecretBox that seals the kept answers of `@AnswersSecret()` routes (the gateway's webhook-secret key). */
export const IDEMPOTENCY_SEALER = Symbol('IDEMPOTENCY_SEALER');

const ANSWERS_SECRET = 'stablepay:answers-secret';
/**
 * Marks a route whose answer carries a secret kept nowhere else in the clear (a merchant's API key, stored only as
 * its hash; a webhook signing secret, stored sealed). The Idempotency-Key row keeps such an answer sealed with
 * IDEMPOTENCY_SEALER, so a copy of the database does not hand out the secret for the key's 24 hours; a replay
 * opens it and answers the same bytes. Without a sealer the answer is not kept (a retry runs again).
 */
export const AnswersSecret = (): MethodDecorator => SetMetadata(ANSWERS_SECRET, true);
/** What a sealed kept answer starts with (SecretBox's format); a JSON text never does. */
const SEALED_PREFIX = 'v1.';
const KEY_HEADER = 'idempotency-key';
/** How long a key's answer is kept and replayed (Stripe's 24 hours); its row may be pruned after that. */
export const IDEMPOTENCY_WINDOW_MS = DAY;
const RETENTION_MS = IDEMPOTENCY_WINDOW_MS;
/**
 * A released row's `created_at` is its claim time moved back by this (about 1000 years). A claim of the version
 * before, still serving during a rolling deploy, compares only `created_at` with its 24 hours, so it takes a
 * released row over as expired (a fresh run, as after the DELETE it did; 5708bdf used -infinity for that) instead of
 * replaying a state it does not know as an empty 200. Unlike -infinity it keeps the claim time: a released row's
 * retry is in its generation for the 24 hours after its claim, like any row's, and the pruner finds released rows
 * past the retention by a range of the created_at index, below every live row's. Hours, not years: an exact
 * length, so the shift keeps the order and the distances of claim times. The arithmetic is the database's (a Date a
 * thousand years back is written by the driver in that era's local mean time).
 */
export const RELEASED_SHIFT = '8760000 hours';
/** A generation: the minute it started (`TimeIdempotencyKeyGenerations1795622400500`). */
export function generationOf(now: Date): number {
  return Math.floor(now.getTime() / 60_000);
}
const GENERATION_NOW_SQL = '(floor(extract(epoch FROM now()) / 60))::integer';
/**
 * How long an in-flight claim holds its key. A request finishes or gives its claim back well within it (commands
 * time out after COMMAND_TIMEOUT_MS, 10 s by default, 120 s at most, plus the read-model waits); a claim older than
 * this belongs to a request whose process died (kill -9, a crash, a lost node) before it could complete or release
 * it. Taking it over lets the client's retry run, as after a 5xx, whose key is released: creates, charges and payment
 * actions derive their ids from the key, so a retry of one that was saved answers what was saved instead of doing it
 * twice. Rotating the webhook secret derives its new secret's id from the key, and `POST /admin/merchants` the
 * merchant's id (its retry reissues the unseen API key). A request that outlives the lease anyway cannot touch the
 * new claim (COMPLETE_SQL, RELEASE_SQL).
 */
const IN_FLIGHT_LEASE_MS = 10 * 60_000;
/**
 * Within the lease, a claim whose owner stopped beating is taken over at once: its process died (kill -9, a lost
 * pod) and a client's retry would otherwise wait out the lease on 409s. Beats and their age are the database's
 * clock (`now()`), never a host's, so skew between gateway replicas does not count. A live process whose event
 * loop stalls longer than OWNER_DEAD_AFTER loses its claims like a dead one; its late completion cannot touch the
 * retry's claim (COMPLETE_SQL), and what runs twice is what a takeover after the lease runs twice.
 */
const OWNER_BEAT_MS = 5_000;
const OWNER_DEAD_AFTER_MS = 30_000;
const OWNER_DEAD_AFTER = `${OWNER_DEAD_AFTER_MS / 1000} seconds`;
const BEAT_SQL = `INSERT INTO idempotency_owners (owner, beat_at) VALUES ($1, now())
  ON CONFLICT (owner) DO UPDATE SET beat_at = now()`;
/** Owners gone for a day have no claim left to judge (RETENTION_MS): their rows go when a process starts. */
const PRUNE_OWNERS_SQL = `DELETE FROM idempotency_owners WHERE beat_at < now() - interval '1 day'`;
const FORGET_OWNER_SQL = 'DELETE FROM idempotency_owners WHERE owner = $1';

/**
 * The claim in one statement: the in-flight row is inserted, or an expired row (older than RETENTION_MS, $5) is
 * taken over; a live row answers nothing. It replaces `DELETE` of the expired row followed by `INSERT ... ON
 * CONFLICT DO NOTHING` (two round trips) with the same outcome under races: ON CONFLICT DO UPDATE locks the row
 * it found, and a concurrent claim waiting on that lock re-checks the WHERE against what the winner wrote (a fresh
 * row), so exactly one claim wins. An in-flight row past IN_FLIGHT_LEASE_MS ($6) is taken over by the same request
 * only (same parameters); another request with that key still gets `idempotency_key_reused`. So is, before the
 * lease ends, an in-flight row whose owner ($7 names ours) has not beaten for OWNER_DEAD_AFTER, once the claim
 * itself is that old ($8): a claim just made by a process whose first beat is not yet visible to this statement's
 * snapshot (a new pod's first keyed request) is not its owner's death. A row claimed before owners were recorded
 * (owner NULL) waits out the lease. A released row (its request answered a 5xx, 409, 429 or validation error) is
 * claimed by any request, as a missing one was, unless a 5xx bound it to its request (`claimable_by`,
 * BindServerErrorReleases1795795200600): then only by the same request until its 24 hours are over. A new row's
 * generation is the minute ($9); taking over an expired row (a released one too, its claim older than the 24 hours,
 * RELEASED_SHIFT) starts the next, at least one past the last, with no binding, and anything else keeps both
 * (TimeIdempotencyKeyGenerations1795622400500). A released row of the version before (-infinity, its claim time
 * unknown) keeps its generation, as that version did, and is claimed by any request.
 */
/** A released row within the 24 hours after its claim (or of the version before, whose claim time is unknown). */
const RELEASED_IN_ITS_DAY = `idempotency_keys.state = 'released'
  AND (idempotency_keys.created_at = '-infinity'
       OR idempotency_keys.created_at >= $5::timestamptz - interval '${RELEASED_SHIFT}')`;
const CLAIM_SQL = `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, owner, generation)
  VALUES ($1, $2, $3, 'in_flight', $4, $7, $9)
  ON CONFLICT (scope, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, state = 'in_flight', response_status = NULL,
        response_body = NULL, created_at = EXCLUDED.created_at, owner = EXCLUDED.owner,
        generation = CASE
          WHEN ${RELEASED_IN_ITS_DAY} THEN idempotency_keys.generation
          WHEN idempotency_keys.created_at < $5 THEN GREATEST(idempotency_keys.generation + 1, EXCLUDED.generation)
          ELSE idempotency_keys.generation END,
        claimable_by = CASE
          WHEN ${RELEASED_IN_ITS_DAY} THEN idempotency_keys.claimable_by
          WHEN idempotency_keys.created_at < $5 THEN NULL
          ELSE idempotency_keys.claimable_by END
    WHERE (idempotency_keys.state <> 'released' AND idempotency_keys.created_at < $5)
       OR (idempotency_keys.state = 'released'
           AND (idempotency_keys.claimable_by IS NULL
                OR idempotency_keys.claimable_by = EXCLUDED.request_hash
                OR NOT (${RELEASED_IN_ITS_DAY})))
       OR (idempotency_keys.state = 'in_flight' AND idempotency_keys.request_hash = EXCLUDED.request_hash
           AND (idempotency_keys.created_at < $6
                OR (idempotency_keys.owner IS NOT NULL AND idempotency_keys.created_at < $8 AND NOT EXISTS (
                      SELECT 1 FROM idempotency_owners o
                      WHERE o.owner = idempotency_keys.owner
                        AND o.beat_at > now() - interval '${OWNER_DEAD_AFTER}'))))
  RETURNING generation`;
const LOAD_SQL =
  'SELECT request_hash, state, response_status, response_body, response_location, created_at, owner, claimable_by FROM idempotency_keys WHERE scope = $1 AND key = $2';
/**
 * Completion and release touch the row only while it is still this request's claim (its `created_at`, $claimedAt): a
 * request that outlived IN_FLIGHT_LEASE_MS and lost its claim to a retry must not overwrite or delete the retry's.
 */
const COMPLETE_SQL = `UPDATE idempotency_keys SET state = 'done', response_status = $3, response_body = $4,
    response_location = $6
  WHERE scope = $1 AND key = $2 AND state = 'in_flight' AND created_at = $5`;
/**
 * A released row keeps its generation (a claim of the key within the 24 hours after this one stays in it). Its
 * `created_at` is the claim time moved back by RELEASED_SHIFT: a gateway of the version before, still serving
 * during a rolling deploy, takes it over as expired instead of replaying a `state` it does not know as an empty 200.
 * A 5xx binds it to its request ($4, the request hash); a binding stays for the generation: only the bound request
 * can have claimed the row since, and a later 409 of it does not make what the 5xx may have saved go away.
 */
const RELEASE_SQL = `UPDATE idempotency_keys SET state = 'released', owner = NULL,
    created_at = $3::timestamptz - interval '${RELEASED_SHIFT}', claimable_by = COALESCE(claimable_by, $4)
  WHERE scope = $1 AND key = $2 AND state = 'in_flight' AND created_at = $3`;

interface StoredKey {
  request_hash: string;
  state: 'in_flight' | 'done' | 'released';
  response_status: number | null;
  response_body: string | null;
  response_location: string | null;
  created_at: Date;
  owner: string | null;
  claimable_by: string | null;
}

/** Canonical JSON (sorted keys) so that the same parameters in another key order hash the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Stripe's Idempotency-Key semantics for POST: the first response is stored and replayed for 24 hours to a
 * retry with the same key and parameters; the same key with other parameters is 400 idempotency_key_reused;
 * a retry while the first is still running gets 409 idempotency_key_in_use (the unique row is the lock, so
 * two concurrent requests never both execute). Responses that say nothing happened (400 validation, 401, 409,
 * 429) are not kept, so a corrected or later retry runs; nor is an answer its handler marks as not final
 * (`answerIsNotFinal`: a 202 pending). A 5xx is not kept either, but what it may have saved is: only the same
 * request retries it (another is idempotency_key_reused). A key used again after its 24 hours is a new request
 * with a new command id (its next generation), not the old object answered again.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor, IdleAware, OnModuleDestroy {
  /** Named prepared statements on the pool (unnamed on the embedded PGlite server). */
  private readonly sql: PooledStatements;
  /** This process's name on its claims (one interceptor per HTTP app, so per process). */
  private readonly owner = randomUUID();
  /** The first beat, awaited by the first keyed request: a claim never names an owner that has not beaten. */
  private beating: Promise<void> | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private destroyed = false;
  private beatFailing = false;
  private readonly logger = new Logger('idempotency');

  constructor(
    @Inject(DataSource) dataSource: DataSource,
    @Inject(IDEMPOTENCY_CLOCK) private readonly clock: Clock = systemClock,
    @Optional() @Inject(IDEMPOTENCY_SEALER) private readonly sealer?: SecretBox,
  ) {
    this.sql = new PooledStatements(dataSource);
  }

  async onModuleDestroy(): Promise<void> {
    this.destroyed = true;
    clearInterval(this.beatTimer);
    this.beatTimer = undefined;
    if (this.beating === undefined) return;
    // A drained process holds no claim; forgetting it is tidiness, and the pool may already be closing.
    await this.sql.query('sp_idem_forget_owner', FORGET_OWNER_SQL, [this.owner]).catch(() => undefined);
  }

  private startBeating(): Promise<void> {
    this.beating ??= (async () => {
      await this.sql.query('sp_idem_prune_owners', PRUNE_OWNERS_SQL, []);
      await this.sql.query('sp_idem_beat', BEAT_SQL, [this.owner]);
      // A first request still starting when the app closed: no timer may outlive the pool.
      if (this.destroyed) return;
      // A failed beat is retried at the next tick; missing beats for OWNER_DEAD_AFTER lets our claims go, so an
      // operator is told when beats start failing and when they are back.
      this.beatTimer = setInterval(() => {
        this.sql.query('sp_idem_beat', BEAT_SQL, [this.owner]).then(
          () => {
            if (!this.beatFailing) return;
            this.beatFailing = false;
            this.logger.log('Idempotency-Key owner beats are back');
          },
          (error: unknown) => {
            if (this.beatFailing) return;
            this.beatFailing = true;
            this.logger.warn(
              `Idempotency-Key owner beats fail (${error instanceof Error ? error.message : String(error)}): after ${OWNER_DEAD_AFTER} without one, this process's in-flight keys may be taken over by retries`,
            );
          },
        );
      }, OWNER_BEAT_MS);
      this.beatTimer.unref();
    })().catch((error: unknown) => {
      this.beating = undefined;
      throw error;
    });
    return this.beating;
  }

  /** Only a POST with the header has anything to do here: every other request skips Nest's pipeline for it. */
  [IDLE_FOR](args: readonly unknown[], type: ContextType | undefined): boolean {
    if (type !== 'http') return true;
    const request = args[0] as FastifyRequest;
    return request.method !== 'POST' || request.headers[KEY_HEADER] === undefined;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (this[IDLE_FOR](context.getArgs(), context.getType())) return next.handle();
    const request = context
      .switchToHttp()
      .getRequest<FastifyRequest & { merchant?: AuthenticatedMerchant }>();
    const reply = context.switchToHttp().getResponse<FastifyReply>();
    const secret = Reflect.getMetadata(ANSWERS_SECRET, context.getHandler()) === true;
    return from(this.handle(request, reply, next, secret));
  }

  private async handle(
    request: FastifyRequest & { merchant?: AuthenticatedMerchant },
    reply: FastifyReply,
    next: CallHandler,
    secret: boolean,
  ): Promise<unknown> {
    const key = checkedIdempotencyKey(request) ?? '';
    const url = request.url.split('?')[0] ?? request.url;
    // A merchant's keys are its own. A request without one (the hosted pages' calls, whose capability is the id in
    // the path; the operator routes, behind their token) has no account to scope by: its keys are the path's, so
    // anyone's key on one intent or page never refuses or answers the same key on another, nor an operator's.
    const scope = request.merchant
      ? `${request.merchant.merchantId}:${request.merchant.mode}`
      : publicScope(url);
    const requestHash = createHash('sha256')
      .update(`${request.method} ${url}\n${canonical(request.body ?? null)}`)
      .digest('hex');
    const now = this.clock.now();

    const generation = await this.claim(scope, key, requestHash, now);
    if (generation === undefined) {
      const stored = await this.load(scope, key);
      // Bound to the request whose 5xx released it: what that one may have saved is under this key's command id.
      if (stored?.state === 'released' && stored.claimable_by !== null && stored.claimable_by !== requestHash)
        throw keyReused(key);
      // Released between our claim and this read: claimable again.
      if (!stored || stored.state === 'released') return this.handle(request, reply, next, secret);
      if (stored.request_hash !== requestHash) throw keyReused(key);
      if (stored.state === 'in_flight') {
        // When the claim is taken over at the latest (IN_FLIGHT_LEASE_MS); a claim naming its owner may be taken
        // over once that owner has missed its beats (OWNER_DEAD_AFTER, plus a beat), so retry then.
        const leaseLeft = new Date(stored.created_at).getTime() + IN_FLIGHT_LEASE_MS - now.getTime();
        const wait = stored.owner ? Math.min(leaseLeft, OWNER_DEAD_AFTER_MS + OWNER_BEAT_MS) : leaseLeft;
        void reply.header('retry-after', String(Math.max(1, Math.ceil(wait / 1000))));
        throw conflict(
          'idempotency_key_in_use',
          'A request with this Idempotency-Key is still being processed. Retry after it completes.',
          'Idempotency-Key',
        );
      }
      void reply.header('idempotent-replayed', 'true');
      if (stored.response_location !== null) void reply.header('location', stored.response_location);
      const status = stored.response_status ?? 200;
      const body: unknown =
        stored.response_body === null ? null : JSON.parse(this.unseal(scope, key, stored.response_body));
      if (status >= 400) throw new DomainError({ ...(body as { error: DomainError }).error, status });
      void reply.status(status);
      return body;
    }

    (request as FastifyRequest & { [IDEMPOTENCY_COMMAND_ID]?: string })[IDEMPOTENCY_COMMAND_ID] =
      idempotencyCommandId(key, generation);
    (request as FastifyRequest & { [IDEMPOTENCY_CLAIMED_AT]?: Date })[IDEMPOTENCY_CLAIMED_AT] = now;
    try {
      const body = await lastValueFrom(next.handle(), { defaultValue: undefined });
      const notFinal = (request as { [IDEMPOTENCY_NOT_FINAL]?: boolean })[IDEMPOTENCY_NOT_FINAL] === true;
      if (notFinal || (secret && !this.sealer)) await this.release(scope, key, now, null);
      else await this.complete(scope, key, now, reply.statusCode, body ?? null, secret, locationOf(reply));
      return body;
    } catch (error) {
      const { status, body } = toEnvelope(error);
      // A 409 or 429 is a refusal for now (something of the merchant's still in progress, a limit): the same
      // request may run later, so its key is not spent on the refusal.
      const nothingHappened =
        status >= 500 ||
        status === 401 ||
        status === 409 ||
        status === 429 ||
        (status === 400 && body.error.type === 'validation_error');
      // A 5xx may follow the request's effect (saved, then the answer lost): its retry must be this request.
      if (nothingHappened || (secret && !this.sealer))
        await this.release(scope, key, now, status >= 500 ? requestHash : null);
      else await this.complete(scope, key, now, status, body, secret);
      throw error;
    }
  }

  /**
   * Inserts the in-flight row (or takes over an expired or released one) and answers its generation; undefined when
   * a live row holds the key.
   */
  private async claim(
    scope: string,
    key: string,
    requestHash: string,
    now: Date,
  ): Promise<number | undefined> {
    if (this.beatTimer === undefined) await this.startBeating();
    const inserted = await this.sql.query<{ generation: number }>('sp_idem_claim', CLAIM_SQL, [
      scope,
      key,
      requestHash,
      now,
      new Date(now.getTime() - RETENTION_MS),
      new Date(now.getTime() - IN_FLIGHT_LEASE_MS),
      this.owner,
      new Date(now.getTime() - OWNER_DEAD_AFTER_MS),
      generationOf(now),
    ]);
    return inserted[0]?.generation;
  }

  private async load(scope: string, key: string): Promise<StoredKey | undefined> {
    return (await this.sql.query<StoredKey>('sp_idem_load', LOAD_SQL, [scope, key]))[0];
  }

  private async complete(
    scope: string,
    key: string,
    claimedAt: Date,
    status: number,
    body: unknown,
    secret: boolean,
    location: string | null = null,
  ): Promise<void> {
    const text = JSON.stringify(body);
    const kept = secret && this.sealer ? this.sealer.seal(text, sealedFor(scope, key)) : text;
    await this.sql.query('sp_idem_complete', COMPLETE_SQL, [scope, key, status, kept, claimedAt, location]);
  }

  /**
   * The kept answer as first sent. One no configured key opens (the webhook-secret key replaced without keeping the
   * old one) cannot be replayed: 500 with its own code, the row left as it is.
   */
  private unseal(scope: string, key: string, kept: string): string {
    if (!kept.startsWith(SEALED_PREFIX)) return kept;
    try {
      if (!this.sealer) throw new SecretUnreadableError('no sealer is configured');
      return this.sealer.open(kept, sealedFor(scope, key));
    } catch (error) {
      if (!(error instanceof SecretUnreadableError)) throw error;
      throw new DomainError({
        type: 'api_error',
        status: 500,
        code: 'idempotent_replay_unreadable',
        message:
          "The first response to this Idempotency-Key is kept sealed and the service's configured encryption keys no longer open it (WEBHOOK_SECRET_ENCRYPTION_KEY was replaced without keeping the old one in WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS). Use another key, or ask the operator to restore the previous key.",
      });
    }
  }

  /** `boundTo`: the request hash only the same request has (a 5xx), or null (any request may claim the key). */
  private async release(scope: string, key: string, claimedAt: Date, boundTo: string | null): Promise<void> {
    await this.sql.query('sp_idem_release', RELEASE_SQL, [scope, key, claimedAt, boundTo]);
  }
}

/** The key's first request had other parameters (Stripe's answer, the same for a kept answer and a 5xx release). */
function keyReused(key: string): DomainError {
  return invalidRequest(
    `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
    'idempotency_key_reused',
    'Idempotency-Key',
  );
}

/** Binds a sealed kept answer to its row: moved to another merchant's or key's row, it does not open. */
/**
 * The scope of a request without a merchant: its path. A path longer than an index entry may be (path parameters reach
 * their routes up to 16 KiB, and the scope is in the primary key, whose entries btree caps near 2.7 kB) is named by
 * its hash; it was a 500 before the route's own 404 could answer. Shorter paths keep their plain scope, so keys
 * claimed before are still found. A hashed scope cannot be a path's: paths start with '/'.
 */
export function publicScope(url: string): string {
  if (Buffer.byteLength(url) <= PUBLIC_SCOPE_MAX_PATH_BYTES) return `public:${url}`;
  return `public:sha256:${createHash('sha256').update(url).digest('hex')}`;
}

const PUBLIC_SCOPE_MAX_PATH_BYTES = 512;

function sealedFor(scope: string, key: string): string {
  return `idempotency\u0000${scope}\u0000${key}`;
}

/** The redirect target of a 3xx answer, kept for its replay. */
function locationOf(reply: FastifyReply): string | null {
  if (reply.statusCode < 300 || reply.statusCode >= 400) return null;
  const location = reply.getHeader('location');
  return typeof location === 'string' ? location : null;
}
