// The benchmark's webhook receiver, in its own process so it does not share the sender's event loop: answers
// every POST with 204 after reading and parsing the body (as a real receiver would), and records, per request,
// the time from `data.object.appended_at_ms` (when the benchmark appended the domain event) to arrival.
// Controlled over IPC: {type:'wait', count} -> {type:'reached'}; {type:'stats'} -> {type:'stats', count, e2e};
// {type:'reset'} -> {type:'reset-ok'}.
const http = require('node:http');
const { performance } = require('node:perf_hooks');

const now = () => performance.timeOrigin + performance.now();
let count = 0;
let target = Infinity;
let e2e = [];

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = now();
    count++;
    try {
      const sent = JSON.parse(Buffer.concat(chunks).toString('utf8'))?.data?.object?.appended_at_ms;
      if (typeof sent === 'number') e2e.push(at - sent);
    } catch {
      // a body that is not JSON still counts as a delivery
    }
    res.writeHead(204);
    res.end();
    if (count >= target) {
      target = Infinity;
      process.send({ type: 'reached', count });
    }
  });
});
server.keepAliveTimeout = 30_000;

process.on('message', (m) => {
  if (m.type === 'reset') {
    count = 0;
    e2e = [];
    target = Infinity;
    process.send({ type: 'reset-ok' });
  } else if (m.type === 'wait') {
    target = m.count;
    if (count >= target) {
      target = Infinity;
      process.send({ type: 'reached', count });
    }
  } else if (m.type === 'stats') {
    process.send({ type: 'stats', count, e2e });
  }
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => process.send({ type: 'ready', port: server.address().port }));
