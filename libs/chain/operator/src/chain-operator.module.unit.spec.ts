import { Injectable, Module, type BeforeApplicationShutdown } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Wallet } from 'ethers';
import { chainOperatorConfigFromEnv } from './chain-operator.config';
import { CHAIN_OPERATOR_CONFIG, OperatorRelayers } from './chain-operator.module';

const config = chainOperatorConfigFromEnv({
  CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:9',
  OPERATOR_PRIVATE_KEY: Wallet.createRandom().privateKey,
  REGISTRY_ADMIN_ADDRESS: Wallet.createRandom().address,
  OPERATOR_PAUSER_ADDRESS: Wallet.createRandom().address,
});

/** Stands for a worker (the deposit worker, a sweeper) that finishes its pass on chain while the service stops. */
@Injectable()
class FinishingWorker implements BeforeApplicationShutdown {
  providerDestroyedWhileStopping: boolean | undefined;
  constructor(private readonly relayers: OperatorRelayers) {}
  beforeApplicationShutdown(): void {
    this.providerDestroyedWhileStopping = this.relayers.require().for('eip155:8453').provider.destroyed;
  }
}

@Module({
  providers: [{ provide: CHAIN_OPERATOR_CONFIG, useValue: config }, OperatorRelayers, FinishingWorker],
})
class WorkerModule {}

describe('OperatorRelayers at shutdown', () => {
  it('keeps the chain providers open until every worker has stopped, then destroys them', async () => {
    const app = await Test.createTestingModule({ imports: [WorkerModule] }).compile();
    await app.init();
    const worker = app.get(FinishingWorker);
    const provider = app.get(OperatorRelayers).require().for('eip155:8453').provider;
    await app.close();
    // Destroyed before the workers' own stop, a pass still running failed with "provider destroyed" at every
    // shutdown and logged it as an error.
    expect(worker.providerDestroyedWhileStopping).toBe(false);
    expect(provider.destroyed).toBe(true);
  });
});
