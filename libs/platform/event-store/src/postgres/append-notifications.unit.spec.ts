import { appendNotificationPrefix, parseAppendNotification } from './append-notifications';

describe('append notification payloads', () => {
  it('carry the appending instance, the category and the transaction id the statement adds', () => {
    const payload = `${appendNotificationPrefix('inst-1', 'subscriptionCheckout')} 123456789012`;
    expect(parseAppendNotification(payload)).toEqual({
      instanceId: 'inst-1',
      category: 'subscriptionCheckout',
      mark: 123456789012n,
    });
  });

  it('are refused when they are not ours (a subscription is then woken without a category)', () => {
    expect(parseAppendNotification(undefined)).toBeUndefined();
    expect(parseAppendNotification('')).toBeUndefined();
    expect(parseAppendNotification('hello')).toBeUndefined();
    expect(parseAppendNotification('inst-1 category notanumber')).toBeUndefined();
  });
});
