// BullMQ's worker in fairque's benchmark of peers: one process, one BullMQ Worker at
// concurrency 10 (PEERS_CONCURRENCY, if set) on the benchmark's queue, running the no-op
// job (common.record).
//
//   PEERS_REDIS_URL=... PEERS_RECORD_SCRIPT=... PEERS_RECORD_KEYS=... node worker.js
//
// SIGTERM or SIGINT: Worker.close() (lets the running jobs finish), then exit; the
// harness SIGKILLs the process group if that takes longer than its grace.
'use strict';

const { Worker } = require('bullmq');
const { QUEUE, connection, record, closeRecorder } = require('./common');

const CONCURRENCY = Number(process.env.PEERS_CONCURRENCY || 10);

const worker = new Worker(QUEUE, async job => record(job.data.entry), {
  connection: connection(),
  concurrency: CONCURRENCY,
});

worker.on('failed', (job, error) => {
  console.error(`job ${job ? job.id : '?'} failed: ${error && error.stack}`);
});
worker.on('error', error => {
  console.error(`worker error: ${error && error.stack}`);
});

let stopping = false;

async function stop(signal) {
  if (stopping) {
    return;
  }
  stopping = true;
  console.log(`${signal}: closing the worker`);
  try {
    await worker.close();
    await closeRecorder();
  } finally {
    process.exit(0);
  }
}

process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

worker
  .waitUntilReady()
  .then(() => console.log(`bullmq worker ${process.pid} ready, concurrency ${CONCURRENCY}`))
  .catch(error => {
    console.error(`worker not ready: ${error && error.stack}`);
    process.exit(1);
  });
