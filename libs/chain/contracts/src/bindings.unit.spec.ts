import { JsonRpcProvider } from 'ethers';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  stablepayRegistryInterface,
  StablepayRegistryAbi,
} from './generated';

describe('generated contract bindings', () => {
  it('parse their ABI once: every contract object of a kind shares one Interface, whatever its address or runner', () => {
    const provider = new JsonRpcProvider('http://127.0.0.1:1', 1, { staticNetwork: true });
    const a = connectStablepayRegistry('0x1111111111111111111111111111111111111111', provider);
    const b = connectStablepayRegistry('0x2222222222222222222222222222222222222222', null);
    expect(a.interface).toBe(b.interface);
    expect(a.interface).toBe(stablepayRegistryInterface());
    expect(connectSubscriptionManager('0x1111111111111111111111111111111111111111').interface).not.toBe(
      a.interface,
    );
    // The shared Interface is the ABI's: every function of it, encoded as a fresh parse would.
    expect(a.interface.encodeFunctionData('merchantAuth', [`0x${'ab'.repeat(32)}`])).toBe(
      new (a.interface.constructor as new (abi: unknown) => typeof a.interface)(
        StablepayRegistryAbi,
      ).encodeFunctionData('merchantAuth', [`0x${'ab'.repeat(32)}`]),
    );
    provider.destroy();
  });
});
