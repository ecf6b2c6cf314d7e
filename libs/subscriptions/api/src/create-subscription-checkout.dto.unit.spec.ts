import { createValidationPipe } from '@stablepay/http';
import { DomainError } from '@stablepay/util';
import { CreateSubscriptionCheckoutDto, toCreateInput } from './create-subscription-checkout.dto';

const base = { price: '150000', price_currency: 'ARS' };
const pipe = createValidationPipe();

/** The body of POST /subscription-checkouts through the global validation pipe, as the aggregate's input. */
async function parse(body: unknown): Promise<unknown> {
  const dto = (await pipe.transform(body, {
    type: 'body',
    metatype: CreateSubscriptionCheckoutDto,
  })) as CreateSubscriptionCheckoutDto;
  return toCreateInput(dto);
}

/** The 400 a body gets: its param and message. */
async function refusal(body: unknown): Promise<{ param?: string; message: string }> {
  try {
    await parse(body);
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    const e = error as DomainError;
    expect(e).toMatchObject({ type: 'validation_error', status: 400 });
    return { param: e.param, message: e.message };
  }
  throw new Error('the body was accepted');
}

describe('POST /subscription-checkouts body (CreateSubscriptionCheckoutDto through the validation pipe)', () => {
  it('passes every field of the right type through and leaves absent and null ones out', async () => {
    const full = {
      ...base,
      budget: '1',
      cap: '2',
      period_duration: 3600,
      supported_chains: ['eip155:8453'],
      metadata: { plan: 'gold', seats: 3 },
      external_customer_id: 'cus_1',
      success_url: 'https://a.example/ok',
      cancel_url: 'https://a.example/no',
      return_url: 'https://a.example/back',
      expires_in: 60,
    };
    expect(await parse(full)).toEqual(full);
    expect(await parse({ ...base, budget: null, cap: undefined, metadata: null })).toEqual(base);
    // Values are the aggregate's to judge: empty strings and out-of-range integers pass the type check.
    expect(await parse({ price: '', price_currency: '', expires_in: -5 })).toEqual({
      price: '',
      price_currency: '',
      expires_in: -5,
    });
  });

  it('refuses an unknown field before anything else, even one named like an Object method', async () => {
    expect(await refusal({ price: 5, interval: 'month' })).toEqual({
      param: 'interval',
      message:
        'Received unknown parameter: interval (this request takes price, price_currency, budget, cap, period_duration, supported_chains, metadata, external_customer_id, success_url, cancel_url, return_url, expires_in).',
    });
    await expect(parse({ ...base, interval: 'month' })).rejects.toMatchObject({ code: 'unknown_parameter' });
    expect(await refusal({ ...base, toString: 'x' })).toMatchObject({ param: 'toString' });
    expect(await refusal({ ...base, hasOwnProperty: 1 })).toMatchObject({ param: 'hasOwnProperty' });
    // An array is an object whose keys are its indexes.
    expect(await refusal([1, 2])).toMatchObject({ param: '0' });
  });

  it('reports the first failing field in the documented order, whatever the order of the keys', async () => {
    expect(await refusal({ budget: 6, price: 5 })).toEqual({
      param: 'price',
      message:
        'price must be a string of digits in minor units of price_currency (for example "150000" for 1,500.00)',
    });
    expect(await refusal({ cap: 1, price: 'x' })).toEqual({
      param: 'price_currency',
      message: 'price_currency is required: an ISO-4217 code such as ARS',
    });
    expect(await refusal({ expires_in: 'x', period_duration: 'y', ...base })).toMatchObject({
      param: 'period_duration',
    });
  });

  it('treats a missing body, null, [] and a JSON primitive as an empty object (price is required)', async () => {
    const required = {
      param: 'price',
      message:
        'price is required and must be a string of digits in minor units of price_currency (for example "150000" for 1,500.00)',
    };
    for (const body of [undefined, null, [], 'abc', 5, true, {}, { price: null, price_currency: 'ARS' }])
      expect(await refusal(body)).toEqual(required);
  });

  it.each([
    ['price_currency', 5, 'price_currency must be an ISO-4217 code such as ARS'],
    ['budget', 5, 'budget must be a string of digits'],
    ['cap', [], 'cap must be a string of digits'],
    ['period_duration', '3600', 'period_duration must be an integer number of seconds (at least 3600)'],
    ['period_duration', 3600.5, 'period_duration must be an integer'],
    ['supported_chains', 'eip155:1', 'supported_chains must be an array of CAIP-2 chain ids'],
    ['supported_chains', ['eip155:1', 2], 'supported_chains must be an array of CAIP-2 chain ids'],
    ['supported_chains', {}, 'supported_chains must be an array of CAIP-2 chain ids'],
    ['metadata', 'x', 'metadata must be an object of string values'],
    ['metadata', [], 'metadata must be an object of string values'],
    ['external_customer_id', 1, 'external_customer_id must be a string'],
    ['success_url', 1, 'success_url must be an absolute http(s) URL'],
    ['cancel_url', {}, 'cancel_url must be an absolute http(s) URL'],
    ['return_url', true, 'return_url must be an absolute http(s) URL'],
    ['expires_in', '60', 'expires_in must be an integer number of seconds (60 to 86400)'],
  ])('refuses %s = %j with its message', async (param, value, message) => {
    const { param: got, message: text } = await refusal({ ...base, [param]: value });
    expect(got).toBe(param);
    expect(text.startsWith(message)).toBe(true);
  });
});
