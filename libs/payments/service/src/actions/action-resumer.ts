import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type Provider,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DomainError, JsonLogger } from '@stablepay/util';
import { ACTION_SUBMISSIONS, type ActionSubmissions, PostgresActionSubmissions } from './action-submissions';
import { PaymentActions } from './payment-actions';

export const actionSubmissionsProvider: Provider = {
  provide: ACTION_SUBMISSIONS,
  inject: [DataSource],
  useFactory: (db: DataSource): ActionSubmissions => new PostgresActionSubmissions(db),
};

/**
 * At start, sends the payment actions a previous process requested but did not get to send (it died between the
 * request fact and the broadcast). In the background: the service is ready at once, and a chain that is down only
 * delays this (each call is retried by the merchant's own retry too).
 */
@Injectable()
export class PaymentActionResumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new JsonLogger('payment-actions');
  private running: Promise<void> | undefined;

  constructor(
    @Inject(ACTION_SUBMISSIONS) private readonly submissions: ActionSubmissions,
    @Inject(PaymentActions) private readonly actions: PaymentActions,
  ) {}

  onApplicationBootstrap(): void {
    this.running = this.resumeAll();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.running;
  }

  /** Every call unfinished now belongs to an earlier process: this one has not requested anything yet. */
  async resumeAll(): Promise<void> {
    for (const pending of await this.submissions.unfinished(500).catch(() => [])) {
      try {
        const answer = await this.actions.resumeSubmission(pending.paymentId, pending.commandId);
        this.logger.log({
          msg: 'payment action resumed',
          paymentId: pending.paymentId,
          commandId: pending.commandId,
          submission: answer.submission,
          txHash: answer.txHash,
        });
      } catch (error) {
        if (error instanceof DomainError && error.code === 'chain_mode_mismatch') {
          // Not a passing fault: this deployment's chains are not the payment's mode's, so no retry sends it here.
          this.logger.error({
            msg: "payment action kept unsent: the payment's mode is not this deployment's chains' mode",
            paymentId: pending.paymentId,
            commandId: pending.commandId,
            error: error.message,
          });
          continue;
        }
        this.logger.warn({
          msg: 'payment action could not be resumed; a retry of the request or the next start sends it',
          paymentId: pending.paymentId,
          commandId: pending.commandId,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
  }
}
