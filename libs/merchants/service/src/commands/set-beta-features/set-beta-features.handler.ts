import { Inject, Injectable } from '@nestjs/common';
import type { MerchantCommandResult, SetBetaFeaturesCommand } from '@stablepay/merchants-api';
import { notFound } from '@stablepay/util';
import { MerchantCommands } from '../../merchant-commands';
import { SettingsReader } from '../../settings.reader';

/** Use case: the operator turns beta features on or off for a merchant (POST /admin/merchants/:id/beta-features). */
@Injectable()
export class SetBetaFeaturesHandler {
  constructor(
    @Inject(MerchantCommands) private readonly commands: MerchantCommands,
    @Inject(SettingsReader) private readonly reader: SettingsReader,
  ) {}

  async handle(command: SetBetaFeaturesCommand): Promise<MerchantCommandResult> {
    // An unknown merchant is 404 before anything is decided (its stream would be empty anyway).
    if (!/^mer_[0-9a-z]{26}$/.test(command.merchantId) || !(await this.reader.find(command.merchantId)))
      throw notFound('merchant', command.merchantId);
    const row = await this.commands.setBetaFeatures(command.merchantId, command.features);
    return { id: row.merchant_id, revision: row.revision };
  }
}
