// Peer for `make bench`: a Postgres job queue as a user would put it in
// front of the model. One Node.js process:
//
//   kafkajs consumer (eachBatch) -> Graphile Worker addJobs, jobKey = run_id
//   (one INSERT per Kafka batch; the key makes a duplicate event replace the
//   still-queued job instead of adding a second one; the offsets are
//   committed after addJobs returned)
//   Graphile Worker pool (concurrency PEER_CONCURRENCY, local queue and
//   batched completion as its performance guide recommends) -> task:
//   POST the stub (fetch, keep-alive) -> INSERT the output into
//   bench_results ON CONFLICT DO NOTHING -> return (Graphile completes the
//   job, i.e. deletes it).
//
// Environment: DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS, MODEL_BASE_URL,
// PEER_TOPIC, PEER_GROUP_ID, PEER_CONCURRENCY (default 32).
// `node worker.js --init` installs Graphile's schema and bench_results.
"use strict";

const crypto = require("crypto");
const { run, makeWorkerUtils, Logger } = require("graphile-worker");
const { Kafka, logLevel } = require("kafkajs");

const env = process.env;
const connectionString = env.DATABASE_URL;
const concurrency = parseInt(env.PEER_CONCURRENCY || "32", 10);
const modelUrl = (env.MODEL_BASE_URL || "").replace(/\/$/, "") + "/chat/completions";

// Warnings and errors only: the default logger prints a line per job.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`[graphile ${level}] ${message}`);
});

const RESULTS = `CREATE TABLE IF NOT EXISTS bench_results (
  run_id text PRIMARY KEY,
  output jsonb NOT NULL,
  completed_at timestamptz NOT NULL DEFAULT now())`;

function runId(ev) {
  return crypto.createHash("sha256")
    .update([ev.job.trim(), ev.tenant.trim(), ev.scheduled_at, ev.version.trim()].join("|"))
    .digest("hex");
}

async function task(payload, helpers) {
  const body = { ...payload.request };
  body.messages = body.messages.map((m) => ({
    ...m, content: m.content.replace("{{input}}", JSON.stringify(payload.input)),
  }));
  const resp = await fetch(modelUrl, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": payload.run_id },
    body: JSON.stringify(body),
  });
  if (!resp.ok) throw new Error(`model answered ${resp.status}`);
  const answer = await resp.json();
  const output = {
    text: answer.choices[0].message.content,
    model: answer.model,
    upstream_request_id: resp.headers.get("x-request-id"),
    usage: answer.usage,
  };
  await helpers.query(
    "INSERT INTO bench_results (run_id, output) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    [payload.run_id, output]);
}

async function main() {
  const utils = await makeWorkerUtils({ connectionString, logger });
  await utils.migrate();
  await utils.withPgClient((c) => c.query(RESULTS));
  if (process.argv[2] === "--init") {
    await utils.release();
    return;
  }

  const runner = await run({
    connectionString,
    logger,
    concurrency,
    maxPoolSize: concurrency + 4,
    pollInterval: 1000,
    noHandleSignals: true,
    taskList: { rl_run: task },
    preset: {
      worker: {
        localQueue: { size: concurrency + 1 },
        completeJobBatchDelay: 0,
      },
    },
  });

  const kafka = new Kafka({
    clientId: "bench-peer-graphile",
    brokers: env.KAFKA_BOOTSTRAP_SERVERS.split(","),
    logLevel: logLevel.ERROR,
  });
  const consumer = kafka.consumer({ groupId: env.PEER_GROUP_ID });
  await consumer.connect();
  await consumer.subscribe({ topic: env.PEER_TOPIC, fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const specs = [];
      for (const m of batch.messages) {
        let ev;
        try {
          ev = JSON.parse(m.value.toString());
        } catch (e) {
          continue; // a real one would dead-letter it
        }
        const id = runId(ev);
        specs.push({
          identifier: "rl_run",
          jobKey: id,
          payload: { run_id: id, request: ev.request, input: ev.input },
          maxAttempts: 5,
        });
      }
      if (specs.length) await utils.addJobs(specs);
    },
  });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await consumer.disconnect();
      await runner.stop();
      await utils.release();
    } finally {
      process.exit(0);
    }
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
