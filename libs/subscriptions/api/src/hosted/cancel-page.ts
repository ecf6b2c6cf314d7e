import { Interface } from 'ethers';
import { SubscriptionManagerAbi } from '@stablepay/contracts';
import {
  businessNameInText,
  escapeHtml as e,
  hostedPage,
  jsonForScript,
  palette,
  visibleText,
} from '@stablepay/hosted-ui';
import type { HostedCancelView } from './hosted-cancel.port';

const MANAGER = new Interface(SubscriptionManagerAbi);

/**
 * The hosted cancel page (SPEC Endpoints > Subscriptions, Cancel): the subscriber connects the wallet that subscribed
 * and sends `subscriberCancel(subscriptionId)` to the merchant's manager (paying the gas). Another wallet is told so
 * and, like a customer who lost the wallet, sent back to the business through the intent's `cancel_url` (the merchant
 * cancels with the signed API call; the service recovers no keys).
 */
export function renderCancelPage(view: HostedCancelView, nonce: string): string {
  const colors = palette(view.background_color, view.primary_color);
  const manager = view.status === 'active' ? view.manager_address : null;
  const active = manager !== null;
  const name = visibleText(view.business_name);
  const activeTitle = name === null ? 'Cancel your subscription' : `Cancel your ${name} subscription`;
  return hostedPage({
    title: active ? activeTitle : stateCopy(view).title,
    businessName: view.business_name,
    colors,
    nonce,
    styles: CANCEL_STYLES,
    status: view.status,
    body: active ? activeBody(view) : stateBody(view),
    ...(active
      ? {
          data: {
            'cancel-data': jsonForScript({
              subscriber: view.subscriber,
              chain_id: view.chain_id,
              chain_name: view.chain_name,
              manager_address: manager,
              calldata: MANAGER.encodeFunctionData('subscriberCancel', [view.subscription_id]),
            }),
          },
          scripts: [CANCEL_SCRIPT],
        }
      : {}),
  });
}

export function cancelPageScripts(view: HostedCancelView): readonly string[] {
  return view.status === 'active' && view.manager_address !== null ? [CANCEL_SCRIPT] : [];
}

export function renderCancelNotFoundPage(nonce: string): string {
  return hostedPage({
    title: 'Subscription not found',
    businessName: '',
    colors: palette(null, null),
    nonce,
    status: 'not_found',
    body: `<h1>Subscription not found</h1><p class="muted">This cancellation link is not valid. Ask the business for help.</p>`,
  });
}

function lostWallet(view: HostedCancelView): string {
  return view.cancel_url
    ? `<a class="link" data-testid="lost-wallet" href="${e(view.cancel_url)}">Lost access to that wallet? Ask ${e(businessNameInText(view.business_name))} to cancel</a>`
    : `<span data-testid="lost-wallet">Lost access to that wallet? Ask ${e(businessNameInText(view.business_name))} to cancel it for you.</span>`;
}

function activeBody(view: HostedCancelView): string {
  return `<h1 data-testid="title">Cancel your subscription</h1>
<p class="muted">To ${e(businessNameInText(view.business_name))}, paid in ${e(view.token_symbol)} on ${e(view.chain_name)}.</p>
<p class="small">Subscribed wallet <span class="mono" data-testid="subscriber">${e(view.subscriber)}</span></p>
<p class="small muted">Connect that wallet and confirm the cancellation: it is recorded on chain (your wallet pays the network fee) and no further charge can be made.</p>
<button type="button" id="connect" class="button" data-testid="cancel" disabled>Connect wallet and cancel</button>
<p class="muted small" id="wallet-note" data-testid="wallet-note" aria-live="polite">To cancel, open this page in a browser with the wallet you subscribed with.</p>
<div class="error small" id="wallet-error" data-testid="wallet-error" role="alert" hidden></div>
<div class="wrong-wallet notice small" id="wrong-wallet" data-testid="wrong-wallet" hidden>
  <p>The connected wallet <span class="mono" data-testid="connected-wallet"></span> is not the one that subscribed. Switch to the subscribed wallet in your wallet app, or:</p>
  <p>${lostWallet(view)}</p>
</div>
<p class="small lost">${lostWallet(view)}</p>`;
}

function stateCopy(view: HostedCancelView): { title: string; message: string } {
  switch (view.status) {
    case 'unavailable':
      return {
        title: 'This subscription cannot be cancelled here',
        message: `This cancellation link cannot be used on this service, and nothing can be sent from this page. Ask ${businessNameInText(view.business_name)} to cancel it for you.`,
      };
    case 'cancelled':
      return {
        title: 'Subscription cancelled',
        message: 'Your subscription is cancelled. No further charges can be made.',
      };
    default:
      return {
        title: 'Subscription cancelled',
        message:
          'Your cancellation is confirmed on chain and is being recorded. No further charges can be made.',
      };
  }
}

function stateBody(view: HostedCancelView): string {
  const copy = stateCopy(view);
  return `<div class="state" data-testid="state" data-status="${e(view.status)}">
  <h1 data-testid="title">${e(copy.title)}</h1>
  <p class="muted">${e(copy.message)}</p>
  ${view.cancel_url ? `<a class="button" data-testid="return-link" href="${e(view.cancel_url)}">Return to ${e(businessNameInText(view.business_name))}</a>` : ''}
</div>`;
}

const CANCEL_STYLES = `
.lost{margin-top:16px;text-align:center}
.wrong-wallet p{margin:6px 0}
#connect{margin-top:8px}
`;

/** The cancel page's script (allowed by its hash): connect, check the wallet, switch chain, subscriberCancel, wait. */
export const CANCEL_SCRIPT = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('cancel-data').textContent);
  var button = document.getElementById('connect');
  var note = document.getElementById('wallet-note');
  var errorBox = document.getElementById('wallet-error');
  var wrong = document.getElementById('wrong-wallet');
  var ethereum = window.ethereum;
  if (!button || !ethereum || typeof ethereum.request !== 'function') return;
  button.disabled = false;
  note.hidden = true;
  function say(text) { note.hidden = false; note.textContent = text; }
  function fail(text) { errorBox.hidden = false; errorBox.textContent = text; }
  function wait(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }
  function receipt(hash) {
    return ethereum.request({ method: 'eth_getTransactionReceipt', params: [hash] }).then(function (r) {
      return r ? r : wait(500).then(function () { return receipt(hash); });
    });
  }
  button.addEventListener('click', function () {
    errorBox.hidden = true;
    wrong.hidden = true;
    button.disabled = true;
    var account;
    ethereum.request({ method: 'eth_requestAccounts' })
      .then(function (accounts) {
        account = accounts && accounts[0];
        if (!account || account.toLowerCase() !== data.subscriber.toLowerCase()) {
          var shown = document.querySelector('[data-testid="connected-wallet"]');
          if (shown) shown.textContent = account || '(none)';
          wrong.hidden = false;
          return 'wrong';
        }
        return ethereum.request({ method: 'eth_chainId' })
          .then(function (current) {
            if (Number(current) === data.chain_id) return null;
            say('Switch your wallet to ' + data.chain_name + '.');
            return ethereum.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: '0x' + data.chain_id.toString(16) }] });
          })
          .then(function () {
            say('Confirm the cancellation in your wallet.');
            return ethereum.request({ method: 'eth_sendTransaction', params: [{ from: account, to: data.manager_address, data: data.calldata, value: '0x0' }] });
          })
          .then(function (hash) {
            note.setAttribute('data-tx-hash', hash);
            say('Cancellation sent. Waiting for it to confirm.');
            return receipt(hash);
          })
          .then(function (r) {
            if (Number(r.status) !== 1) throw new Error('The cancellation transaction failed on chain.');
            return 'sent';
          });
      })
      .then(function (outcome) {
        button.disabled = false;
        if (outcome !== 'sent') return;
        button.hidden = true;
        say('Your subscription is cancelled on chain. No further charges can be made.');
        note.setAttribute('data-done', 'true');
      })
      .catch(function (err) {
        button.disabled = false;
        note.hidden = true;
        fail(err && err.code === 4001 ? 'You declined in your wallet. Nothing was sent.' : (err && err.message) ? err.message : String(err));
      });
  });
})();
`;
