#!/usr/bin/env python3
"""Peer for `make bench`: the worker most teams write first.

One Kafka consumer (confluent-kafka) per process, one event and one model
call at a time, psycopg 3 in autocommit mode, httpx with keep-alive for the
model. Per event:

  1. register   INSERT INTO jobs ... ON CONFLICT (run_id) DO NOTHING
  2. lease      UPDATE jobs SET status='running', lock_owner, lock_expires_at
                WHERE pending or the lease expired  (no row: skip the event)
  3. call       POST {MODEL_BASE_URL}/chat/completions, Idempotency-Key
  4. complete   one transaction: UPDATE jobs (only while we hold the lease)
                + INSERT two outbox rows
  5. notify     produce the outbox rows to the notification topic, flush,
                then UPDATE outbox SET delivered_at = now()
  6. offset     store the offset (auto commit then commits stored offsets)

Not a strawman: the identity is the same sha256 over job, tenant,
scheduled_at and version; the lease is checked on completion; offsets are
committed only after the durable write. What it lacks compared with
Runledger is concurrency inside the process, batching, a fencing token,
an attempts log, retries and a dead-letter topic.

    peer_python_worker.py --init DSN          create the tables
    peer_python_worker.py (env as below)      run until SIGTERM

Environment: DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS, MODEL_BASE_URL,
PEER_TOPIC, PEER_NOTIFY_TOPIC, PEER_GROUP_ID, PEER_WORKER_ID, and
PEER_ASSIGN_FILE (optional: the number of partitions assigned is written
there on every assignment).
"""
import hashlib
import json
import os
import signal
import sys

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    run_id          text PRIMARY KEY,
    job             text NOT NULL,
    tenant          text NOT NULL,
    scheduled_at    timestamptz NOT NULL,
    version         text NOT NULL,
    request         jsonb NOT NULL,
    input           jsonb,
    status          text NOT NULL DEFAULT 'pending',
    lock_owner      text,
    lock_expires_at timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    output          jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz
);
CREATE TABLE IF NOT EXISTS outbox (
    id           bigserial PRIMARY KEY,
    run_id       text NOT NULL REFERENCES jobs (run_id),
    channel      text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    UNIQUE (run_id, channel)
);
"""


def run_id_of(ev):
    # Same identity as Runledger's (the event is already in UTC here).
    text = "|".join((ev["job"].strip(), ev["tenant"].strip(),
                     ev["scheduled_at"], ev["version"].strip()))
    return hashlib.sha256(text.encode()).hexdigest()


def main():
    import psycopg

    if len(sys.argv) == 3 and sys.argv[1] == "--init":
        with psycopg.connect(sys.argv[2], autocommit=True) as conn:
            conn.execute(SCHEMA)
        return 0

    import httpx
    from confluent_kafka import Consumer, Producer

    env = os.environ
    worker = env["PEER_WORKER_ID"]
    model_url = env["MODEL_BASE_URL"].rstrip("/") + "/chat/completions"
    notify_topic = env["PEER_NOTIFY_TOPIC"]
    conn = psycopg.connect(env["DATABASE_URL"], autocommit=True)
    http = httpx.Client(timeout=120.0)
    consumer = Consumer({
        "bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": env["PEER_GROUP_ID"],
        "auto.offset.reset": "earliest",
        "enable.auto.offset.store": False,
        "enable.auto.commit": True,
    })
    producer = Producer({
        "bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"],
        "enable.idempotence": True,
    })
    assign_file = env.get("PEER_ASSIGN_FILE")

    def on_assign(c, parts):
        # The bench waits until every worker holds partitions.
        if assign_file:
            with open(assign_file + ".tmp", "w") as f:
                f.write("%d\n" % len(parts))
            os.replace(assign_file + ".tmp", assign_file)

    consumer.subscribe([env["PEER_TOPIC"]], on_assign=on_assign)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))

    while not stopping:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            continue
        try:
            ev = json.loads(msg.value())
            rid = run_id_of(ev)
        except (ValueError, KeyError, AttributeError):
            consumer.store_offsets(msg)  # a real one would dead-letter it
            continue
        request = {"notify": ev.get("notify", []), "request": ev["request"]}
        conn.execute(
            "INSERT INTO jobs (run_id, job, tenant, scheduled_at, version,"
            "                  request, input)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (run_id) DO NOTHING",
            (rid, ev["job"], ev["tenant"], ev["scheduled_at"], ev["version"],
             json.dumps(request), json.dumps(ev.get("input"))))
        row = conn.execute(
            "UPDATE jobs SET status = 'running', lock_owner = %s,"
            "       lock_expires_at = now() + interval '30 seconds',"
            "       attempts = attempts + 1"
            " WHERE run_id = %s"
            "   AND (status = 'pending'"
            "        OR (status = 'running' AND lock_expires_at < now()))"
            " RETURNING input", (worker, rid)).fetchone()
        if row is None:  # done already, or someone else holds it
            consumer.store_offsets(msg)
            continue
        body = dict(ev["request"])
        body["messages"] = [
            dict(m, content=m["content"].replace(
                "{{input}}", json.dumps(row[0])))
            for m in body["messages"]]
        resp = http.post(model_url, json=body,
                         headers={"Idempotency-Key": rid})
        resp.raise_for_status()
        answer = resp.json()
        output = {"text": answer["choices"][0]["message"]["content"],
                  "model": answer.get("model"),
                  "upstream_request_id": resp.headers.get("x-request-id"),
                  "usage": answer.get("usage")}
        channels = list(ev.get("notify", []))
        payloads = [json.dumps({"run_id": rid, "job": ev["job"],
                                "tenant": ev["tenant"], "channel": ch,
                                "output": output}) for ch in channels]
        with conn.transaction():
            done = conn.execute(
                "UPDATE jobs SET status = 'completed', output = %s,"
                "       completed_at = now(), lock_owner = NULL,"
                "       lock_expires_at = NULL"
                " WHERE run_id = %s AND lock_owner = %s"
                "   AND status = 'running'",
                (json.dumps(output), rid, worker)).rowcount
            if done:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO outbox (run_id, channel, payload)"
                        " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        [(rid, ch, p) for ch, p in zip(channels, payloads)])
        if done:
            for ch, p in zip(channels, payloads):
                producer.produce(notify_topic, key=rid, value=p,
                                 headers={"idempotency-key": rid + ":" + ch})
            producer.flush(30)
            conn.execute("UPDATE outbox SET delivered_at = now()"
                         " WHERE run_id = %s AND delivered_at IS NULL",
                         (rid,))
        consumer.store_offsets(msg)

    consumer.close()
    producer.flush(10)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
