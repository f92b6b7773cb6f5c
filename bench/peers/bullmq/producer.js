// BullMQ's producer in fairque's benchmark of peers, started once per driver run and
// kept running, so that the driver's timings measure BullMQ's calls, not Node's start.
//
// Reads one JSON command per line on stdin and answers one JSON line on stdout:
//   {"op": "add", "entries": [...]}   Queue.add once per entry, one after the other
//   {"op": "add", "entries": ["lat T"], "restamp": true}
//                                     the same, T replaced by this process's wall clock
//                                     just before Queue.add (the latency run's pushes:
//                                     the pipe from the driver is not BullMQ's time)
//   {"op": "bulk", "entries": [...]}  one Queue.addBulk of all the entries
//   {"op": "ping"}                    nothing (the pipe's own round trip)
// Answers {"ok": N} (jobs added) or {"error": "..."}; on start {"ready": true, ...}.
// Ends on end of stdin, SIGTERM or SIGINT (Queue.close(), then exit).
'use strict';

const readline = require('node:readline');
const { Queue } = require('bullmq');
const { QUEUE, connection, now } = require('./common');

const NAME = 'job';

const queue = new Queue(QUEUE, { connection: connection() });

function answer(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

async function run(command) {
  const entries = command.entries || [];
  switch (command.op) {
    case 'add':
      for (const entry of entries) {
        const data = command.restamp
          ? { entry: `${entry.split(' ')[0]} ${now().toFixed(6)}` }
          : { entry };
        await queue.add(NAME, data);
      }
      return entries.length;
    case 'bulk':
      await queue.addBulk(entries.map(entry => ({ name: NAME, data: { entry } })));
      return entries.length;
    case 'ping':
      return 0;
    default:
      throw new Error(`unknown op ${JSON.stringify(command.op)}`);
  }
}

let stopping = false;

async function stop(code) {
  if (stopping) {
    return;
  }
  stopping = true;
  try {
    await queue.close();
  } finally {
    process.exit(code);
  }
}

async function main() {
  await queue.waitUntilReady();
  const versions = {
    bullmq: require('bullmq/package.json').version,
    ioredis: require('ioredis/package.json').version,
    node: process.version,
  };
  answer({ ready: true, ...versions });
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) {
      continue;
    }
    try {
      answer({ ok: await run(JSON.parse(line)) });
    } catch (error) {
      answer({ error: String((error && error.stack) || error) });
    }
  }
  await stop(0);
}

process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));

main().catch(error => {
  console.error(`producer: ${(error && error.stack) || error}`);
  stop(1);
});
