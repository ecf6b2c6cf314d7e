/**
 * The hosted payment page's script (allowed by its hash in the CSP). It reads `#pay-data`, keeps the network and
 * token picker and the amount to send in step, polls `<checkout_id>/status` on the page's own origin while the
 * payment is pending or confirming (reloading into the state page once it is final), and, when the browser has an
 * EIP-1193 wallet, offers to send the ERC-20 transfer of the remaining amount to the deposit address from it.
 */
export const PAY_SCRIPT = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('pay-data').textContent);
  var chain = document.getElementById('chain');
  var token = document.getElementById('token');
  var button = document.getElementById('wallet-pay');
  var note = document.getElementById('wallet-note');
  var selected = data.assets[0] || null;
  var status = data.status;
  function byTestId(id) { return document.querySelector('[data-testid="' + id + '"]'); }
  function setText(id, text) { var el = byTestId(id); if (el) el.textContent = text; }
  function chainName(caip2) { return data.chain_names[caip2] || caip2; }
  function render() {
    if (!selected) return;
    setText('send-amount', selected.token_amount_decimal + ' ' + selected.token_symbol);
    setText('send-chain', chainName(selected.chain));
  }
  if (chain && token) {
    chain.addEventListener('change', function () {
      var tokens = data.assets.filter(function (a) { return a.chain === chain.value; });
      token.textContent = '';
      tokens.forEach(function (a) {
        var opt = document.createElement('option');
        opt.value = a.asset;
        opt.textContent = a.token_symbol;
        token.appendChild(opt);
      });
      selected = tokens[0] || null;
      render();
    });
    token.addEventListener('change', function () {
      selected = data.assets.filter(function (a) { return a.asset === token.value; })[0] || null;
      render();
    });
  }

  function showStatus(next) {
    status = next;
    var box = byTestId('payment-status');
    var copy = data.status_copy[next];
    if (!box || !copy) return;
    box.setAttribute('data-status', next);
    box.className = 'status status-' + next;
    setText('status-title', copy.title);
    setText('status-message', copy.message);
  }
  var statusUrl = encodeURIComponent(data.checkout_id) + '/status';
  var timer = null;
  function poll() {
    timer = null;
    fetch(statusUrl, { cache: 'no-store', headers: { accept: 'application/json' } })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (s) {
        if (!s || typeof s.status !== 'string') return;
        data.amount_paid = s.amount_paid;
        data.detected_asset = s.detected_asset;
        if (s.status === 'pending' || s.status === 'confirming') {
          if (s.status !== status) showStatus(s.status);
        } else {
          // Final: the server renders the state page (with the way back to the business).
          window.location.reload();
          return 'final';
        }
      })
      .catch(function () { /* a missed poll is retried */ })
      .then(function (final) { if (final !== 'final') schedule(data.poll_ms); });
  }
  function schedule(ms) { if (timer === null) timer = setTimeout(poll, ms); }
  schedule(data.poll_ms);

  // Optional wallet payment: any EIP-1193 provider (window.ethereum).
  var ethereum = window.ethereum;
  if (!ethereum || typeof ethereum.request !== 'function' || !button) return;
  button.hidden = false;
  function say(text) { note.hidden = false; note.textContent = text; }
  function word(hex) { return hex.replace(/^0x/, '').toLowerCase().padStart(64, '0'); }
  function remaining() {
    var due = BigInt(selected.token_amount);
    var paid = data.detected_asset === selected.asset ? BigInt(data.amount_paid || '0') : BigInt(0);
    return due > paid ? due - paid : BigInt(0);
  }
  button.addEventListener('click', function () {
    if (!selected) return;
    var amount = remaining();
    if (amount === BigInt(0)) { say('The full amount has already arrived.'); return; }
    var chainId = Number(selected.chain.split(':')[1]);
    var tokenAddress = selected.asset.split('/erc20:')[1];
    button.disabled = true;
    say('Confirm in your wallet.');
    var from;
    ethereum.request({ method: 'eth_requestAccounts' })
      .then(function (accounts) {
        from = accounts[0];
        return ethereum.request({ method: 'eth_chainId' });
      })
      .then(function (current) {
        if (Number(current) === chainId) return null;
        return ethereum.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: '0x' + chainId.toString(16) }] });
      })
      .then(function () {
        // ERC-20 transfer(deposit_address, amount)
        var calldata = '0xa9059cbb' + word(data.deposit_address) + word(amount.toString(16));
        return ethereum.request({ method: 'eth_sendTransaction', params: [{ from: from, to: tokenAddress, data: calldata, value: '0x0' }] });
      })
      .then(function (hash) {
        button.hidden = true;
        say('Transaction sent: ' + hash + '. Waiting for it to arrive.');
        var el = byTestId('wallet-note');
        if (el) el.setAttribute('data-tx-hash', hash);
      })
      .catch(function (err) {
        button.disabled = false;
        say(err && err.code === 4001 ? 'You declined in your wallet. Nothing was sent.' : 'The wallet could not send the payment: ' + (err && err.message ? err.message : String(err)));
      });
  });
})();
`;
