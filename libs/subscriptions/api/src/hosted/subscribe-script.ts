/**
 * The hosted subscribe page's script (allowed by its hash in the CSP; no eval, no other source). It keeps the
 * network and token picker in step, and runs the wallet step with any EIP-1193 wallet (`window.ethereum`):
 *
 * 1. connect (eth_requestAccounts) and switch to the chosen chain (wallet_switchEthereumChain);
 * 2. ask the page's origin for the subscribe authorization (`<id>/subscribe` with chain, asset, subscriber: the
 *    service converts price, cap and budget at one rate rounding up, SPEC Rules 4) and show those figures;
 * 3. on confirmation: approve the manager for the maximum allowance (SPEC Rules 5; skipped when the allowance is
 *    already there), then send the one subscribe transaction (registers the subscription, pays the first charge);
 * 4. report the transaction hash, then reload into the state page (completed once the first charge is recorded).
 *
 * Every amount shown comes from the service's answer, formatted exactly with BigInt.
 */
export const SUBSCRIBE_SCRIPT = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('subscribe-data').textContent);
  var chain = document.getElementById('chain');
  var token = document.getElementById('token');
  var button = document.getElementById('continue');
  var subscribeButton = document.getElementById('subscribe');
  var confirmBox = document.getElementById('confirm');
  var note = document.getElementById('wallet-note');
  var errorBox = document.getElementById('wallet-error');
  var selected = data.options[0] || null;
  var authorization = null;
  var account = null;
  function setText(id, text) { var el = document.querySelector('[data-testid="' + id + '"]'); if (el) el.textContent = text; }
  function say(text) { note.hidden = false; note.textContent = text; }
  function fail(text) { errorBox.hidden = false; errorBox.textContent = text; }
  function clearError() { errorBox.hidden = true; errorBox.textContent = ''; }
  function render() {
    if (!selected) return;
    setText('token-amount', selected.display.amount);
    setText('rate', selected.display.rate);
    setText('limits', selected.display.limits);
  }
  function reset() {
    authorization = null;
    confirmBox.hidden = true;
    subscribeButton.hidden = true;
    button.hidden = false;
    button.disabled = !window.ethereum;
    clearError();
  }
  function fillTokens() {
    var tokens = data.options.filter(function (o) { return o.chain === chain.value; });
    token.textContent = '';
    tokens.forEach(function (o) { var opt = document.createElement('option'); opt.value = o.asset; opt.textContent = o.token_symbol; token.appendChild(opt); });
    selected = tokens[0] || null;
    render();
    reset();
  }
  if (chain && token) {
    chain.addEventListener('change', fillTokens);
    token.addEventListener('change', function () {
      selected = data.options.filter(function (o) { return o.asset === token.value; })[0] || null;
      render();
      reset();
    });
  }
  var ethereum = window.ethereum;
  if (!button || !ethereum || typeof ethereum.request !== 'function') return;
  button.disabled = false;
  note.hidden = true;

  function units(value, decimals, symbol) {
    var digits = BigInt(value).toString().padStart(decimals + 1, '0');
    var whole = digits.slice(0, digits.length - decimals).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ',');
    var fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
    return whole + (fraction ? '.' + fraction : '') + ' ' + symbol;
  }
  function word(hex) { return hex.replace(/^0x/, '').toLowerCase().padStart(64, '0'); }
  function wait(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }
  function receipt(hash) {
    return ethereum.request({ method: 'eth_getTransactionReceipt', params: [hash] }).then(function (r) {
      return r ? r : wait(500).then(function () { return receipt(hash); });
    });
  }
  function post(body) {
    return fetch(data.subscribe_path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      cache: 'no-store',
    }).then(function (res) {
      return res.json().then(function (json) {
        if (!res.ok) throw new Error((json && json.error && json.error.message) || 'The service refused (' + res.status + ').');
        return { status: res.status, body: json };
      });
    });
  }
  function walletError(err) {
    if (err && err.code === 4001) return 'You declined in your wallet. Nothing was sent.';
    return (err && err.message) ? err.message : String(err);
  }
  function busy(el, on) { el.disabled = on; if (chain) chain.disabled = on; if (token) token.disabled = on; }

  button.addEventListener('click', function () {
    if (!selected) return;
    clearError();
    busy(button, true);
    var option = selected;
    var chainId = Number(option.chain.split(':')[1]);
    say('Connect your wallet.');
    ethereum.request({ method: 'eth_requestAccounts' })
      .then(function (accounts) {
        if (!accounts || !accounts[0]) throw new Error('The wallet shared no account.');
        account = accounts[0];
        return ethereum.request({ method: 'eth_chainId' });
      })
      .then(function (current) {
        if (Number(current) === chainId) return null;
        say('Switch your wallet to ' + option.chain_name + '.');
        return ethereum.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: '0x' + chainId.toString(16) }] });
      })
      .then(function () { say('Preparing your subscription.'); return post({ chain: option.chain, asset: option.asset, subscriber: account }); })
      .then(function (res) {
        if (selected !== option) return;
        var a = res.body;
        authorization = a;
        setText('confirm-wallet', account);
        setText('confirm-first-charge', units(a.first_charge_amount, a.token_decimals, a.token_symbol));
        setText('confirm-cap', units(a.cap_amount, a.token_decimals, a.token_symbol));
        setText('confirm-budget', units(a.budget_amount, a.token_decimals, a.token_symbol));
        setText('confirm-manager', a.manager_address);
        setText('confirm-rate', a.rate ? '1 ' + a.token_symbol + ' = ' + a.rate.value + ' ' + a.rate.currency + ' (as of ' + a.rate.as_of.replace('T', ' ').replace(/\\.\\d+Z$/, ' UTC') + ')' : '');
        confirmBox.hidden = false;
        button.hidden = true;
        subscribeButton.hidden = false;
        note.hidden = true;
        busy(button, false);
      })
      .catch(function (err) { busy(button, false); note.hidden = true; fail(walletError(err)); });
  });

  subscribeButton.addEventListener('click', function () {
    var a = authorization;
    if (!a) return;
    clearError();
    busy(subscribeButton, true);
    var approve = a.transactions[0];
    var subscribe = a.transactions[1];
    // allowance(subscriber, manager)
    var allowanceCall = '0xdd62ed3e' + word(account) + word(a.manager_address);
    ethereum.request({ method: 'eth_call', params: [{ to: a.token_address, data: allowanceCall }, 'latest'] })
      .then(function (allowance) {
        if (BigInt(allowance) >= BigInt(a.approval.amount)) return null;
        say('Approve the subscription contract in your wallet.');
        return ethereum.request({ method: 'eth_sendTransaction', params: [{ from: account, to: approve.to, data: approve.data, value: '0x0' }] })
          .then(function (hash) { say('Waiting for the approval to confirm.'); return receipt(hash); })
          .then(function (r) { if (Number(r.status) !== 1) throw new Error('The approval transaction failed.'); });
      })
      .then(function () {
        say('Confirm the subscription in your wallet.');
        return ethereum.request({ method: 'eth_sendTransaction', params: [{ from: account, to: subscribe.to, data: subscribe.data, value: '0x0' }] });
      })
      .then(function (hash) {
        subscribeButton.hidden = true;
        note.setAttribute('data-tx-hash', hash);
        say('Subscription sent. Waiting for it to confirm.');
        return receipt(hash).then(function (r) {
          if (Number(r.status) !== 1) throw new Error('The subscribe transaction failed on chain. Nothing was charged.');
          return post({ chain: a.chain, asset: a.asset, subscriber: account, tx_hash: hash });
        });
      })
      .then(function (res) {
        if (res.status === 202) say('Your subscription is confirming. This page updates when it is done.');
        // The server renders the completed page (or, while the chain confirms, this page again).
        setTimeout(function () { window.location.reload(); }, res.status === 202 ? 3000 : 0);
      })
      .catch(function (err) {
        busy(subscribeButton, false);
        subscribeButton.hidden = false;
        note.hidden = true;
        fail(walletError(err));
      });
  });
})();
`;
