// What BullMQ's worker and producer share in fairque's benchmark of peers (bench/peers).
//
// The job is the one the Python peers run (peers_job.py): one Redis call of its own, an
// EVALSHA of peers_job.RECORD (handed over by peer_bullmq.py in PEERS_RECORD_SCRIPT, so
// the script, and so its SHA, is the very text the Python peers load) on the keys of
// PEERS_RECORD_KEYS, with the job's start time (this machine's wall clock, in seconds
// with 6 decimals, as Python's f"{time.time():.6f}") and its entry.
'use strict';

const { performance } = require('node:perf_hooks');
const IORedis = require('ioredis');

const QUEUE = 'peers'; // one FIFO queue: open-source BullMQ has no tenants

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set (peer_bullmq.py sets it)`);
  }
  return value;
}

// The benchmark's own server (run.py's throwaway one): there is no default.
function url() {
  return required('PEERS_REDIS_URL');
}

// BullMQ's connection options for that server (BullMQ makes its own ioredis clients).
function connection() {
  const parsed = new URL(url());
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    db: Number(parsed.pathname.replace('/', '') || 0),
    maxRetriesPerRequest: null, // what BullMQ asks of a worker's connection
  };
}

// Wall-clock seconds with sub-millisecond digits: Date.now() has only milliseconds.
function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

// A client per process, made on the job's first call (as peers_job.record does).
let recorder = null;
let recordKeys = [];

function recordClient() {
  if (recorder === null) {
    recordKeys = JSON.parse(required('PEERS_RECORD_KEYS'));
    recorder = new IORedis(url());
    // ioredis sends EVALSHA and loads the script on NOSCRIPT, as redis-py's Script does.
    recorder.defineCommand('peersRecord', {
      numberOfKeys: recordKeys.length,
      lua: required('PEERS_RECORD_SCRIPT'),
    });
  }
  return recorder;
}

// The no-op job's body: one Redis call.
async function record(entry) {
  const started = now();
  const client = recordClient();
  await client.peersRecord(...recordKeys, started.toFixed(6), entry);
}

async function closeRecorder() {
  if (recorder !== null) {
    await recorder.quit();
    recorder = null;
  }
}

module.exports = { QUEUE, connection, now, record, closeRecorder };
