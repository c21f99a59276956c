#!/usr/bin/env python3
"""Writes N distinct schedule events as `tenant<TAB>json` lines for
`kcat -P -K '\\t'` (key = tenant, as docs/design.md says).

    gen_events.py --job bench-zero --count 20000 [--tenants 64] > events.tsv

--tenant NAME gives every event that tenant instead. --answer-bytes N asks
the stub for answers of N bytes (its `oversize` directive in the prompt),
as long reports are. --input-bytes N adds to each event's input a text of
about N bytes (words of a small vocabulary, a different sequence for
each event), which the prompt's {{input}} carries to the model, as
documents to summarise are. It compresses more than prose: pglz stores
20 kB of it in 3.5 kB, and 20 kB of English text in 9.4.
Event i is job JOB, tenant tenant-(i % TENANTS), scheduled
2026-08-07T09:00:00Z + i hours, version v1, input {"doc": i}, model stub-1,
notify ["email","slack"]: the shape of tests/e2e's e2e_event(). Every line
is a distinct logical run. Standard library only, ~100k lines/s.
"""
import argparse
import datetime
import json
import sys

BASE = datetime.datetime(2026, 8, 7, 9, 0, 0, tzinfo=datetime.timezone.utc)


WORDS = ("the", "run", "ledger", "lease", "answer", "report", "tenant",
         "window", "model", "notification", "once", "schedule", "quarter",
         "revenue", "summary", "customer")


def text_of(i, size):
    """About size bytes of words, a sequence of its own for event i."""
    words, n, x = [], 0, i * 2654435761 + 1
    while n < size:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        w = WORDS[x >> 60]
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--tenants", type=int, default=64)
    ap.add_argument("--tenant", help="one tenant for every event")
    ap.add_argument("--answer-bytes", type=int, default=0)
    ap.add_argument("--input-bytes", type=int, default=0)
    a = ap.parse_args()
    out = sys.stdout
    hour = datetime.timedelta(hours=1)
    for i in range(a.start, a.start + a.count):
        tenant = a.tenant or "tenant-%d" % (i % a.tenants)
        at = (BASE + i * hour).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        ev = {
            "job": a.job, "tenant": tenant, "scheduled_at": at,
            "version": "v1", "input": {"doc": i},
            "request": {"model": "stub-1", "temperature": 0,
                        "messages": [{"role": "user",
                                      "content": "summarise {{input}}"}]},
            "notify": ["email", "slack"],
        }
        if a.input_bytes > 0:
            ev["input"]["text"] = text_of(i, a.input_bytes)
        if a.answer_bytes > 0:
            ev["request"]["messages"][0]["content"] += (
                " [[fault:oversize bytes=%d]]" % a.answer_bytes)
        out.write(tenant)
        out.write("\t")
        out.write(json.dumps(ev, separators=(",", ":")))
        out.write("\n")


if __name__ == "__main__":
    main()
