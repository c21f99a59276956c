#!/usr/bin/env python3
"""Window starts of rl_cron_next against croniter, over random expressions
around the DST transitions of five zones.

Usage: compare_croniter.py CRON_WINDOWS [SEED] [COUNT]

Two comparisons per expression, both exact:

1. The rule. croniter over naive datetimes gives the matching wall-clock
   times (no zone involved); Python's zoneinfo maps each to UTC under
   Runledger's documented rule: a local time that occurs once is that
   instant, one that occurs twice is its first occurrence, one that does not
   occur is the instant of the jump over it; equal instants are one window.
   rl_cron_next must give exactly that list.

2. croniter's own zone handling. croniter documents that a nonexistent time
   moves forward to the next existing one and that it picks an ambiguous
   time's occurrence closest to the previous one; for expressions with '*'
   hours it skips nonexistent times, and in a repeated hour it may fire at
   both occurrences. Those differ from the rule on purpose, so fires within
   |jump| + 2 h of a transition are left out of this comparison (and
   counted); every other fire must be the same.

It takes about 30 s on 2 cores (both passes of `make test` run it):
2,000 expressions by default, up to 96 window starts each around five
zones' transitions, every one computed by both implementations and by
croniter's zone handling; fewer would leave rare field combinations (a
day-of-month and day-of-week pair landing on a skipped hour) undrawn.

Two croniter readings of the syntax differ from cron's and are not drawn:
a range "a-a" (croniter: the whole field, wrapping around) and a day field
whose list covers every day (croniter: as if '*').

A failure prints the seed, the expression, the zone and both lists, so the
case replays with the same seed.
"""
import datetime as dt
import random
import subprocess
import sys
import zoneinfo

from croniter import croniter

UTC = dt.timezone.utc
ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
         "Asia/Kathmandu", "Pacific/Apia"]
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
          "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def transitions(zone, y0=1985, y1=2030):
    """UTC instants (epoch) where the zone's offset changes, with the
    change in seconds; found by scanning days (no zone changes twice in a
    day) and bisecting."""
    z = zoneinfo.ZoneInfo(zone)
    out = []
    t = int(dt.datetime(y0, 1, 1, tzinfo=UTC).timestamp())
    end = int(dt.datetime(y1, 1, 1, tzinfo=UTC).timestamp())

    def off(u):
        return dt.datetime.fromtimestamp(u, z).utcoffset().total_seconds()

    prev = off(t)
    while t < end:
        n = t + 86400
        o = off(n)
        if o != prev:
            lo, hi = t, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if off(mid) == prev:
                    lo = mid
                else:
                    hi = mid
            out.append((hi, int(o - prev)))
            prev = o
        t = n
    return out


def rule_utc(naive, z):
    """Runledger's rule: the UTC epoch of a wall-clock time in zone z."""
    cands = set()
    for fold in (0, 1):
        a = naive.replace(tzinfo=z, fold=fold)
        u = int(a.timestamp())
        back = dt.datetime.fromtimestamp(u, z).replace(tzinfo=None)
        if back == naive:
            cands.add(u)
    if cands:
        return min(cands)
    # A gap: the instant the offset changes between the two readings.
    lo = int(naive.replace(tzinfo=z, fold=1).timestamp())
    hi = int(naive.replace(tzinfo=z, fold=0).timestamp())
    lo, hi = min(lo, hi), max(lo, hi)
    o_lo = dt.datetime.fromtimestamp(lo, z).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if dt.datetime.fromtimestamp(mid, z).utcoffset() == o_lo:
            lo = mid
        else:
            hi = mid
    return hi


def field(rng, lo, hi, names=None):
    def value():
        v = rng.randint(lo, hi)
        if names and rng.random() < 0.3:
            return names[v - lo]
        return str(v)

    def item():
        r = rng.random()
        if r < 0.25:
            return "*"
        if r < 0.45:
            return value()
        # croniter reads a range "a-a" as wrapping around the whole field
        # (every value) where cron means the one value: ranges here have
        # a < b so that both read them alike.
        a = rng.randint(lo, hi - 1)
        b = rng.randint(a + 1, hi)
        if r < 0.6:
            return "%d-%d" % (a, b)
        s = rng.randint(2, max(2, (hi - lo) // 2))
        if r < 0.75:
            return "*/%d" % s
        if r < 0.85:
            return "%d/%d" % (a, s)
        return "%d-%d/%d" % (a, b, s)

    first = item()
    if first == "*" or rng.random() < 0.6:
        return first
    items = [first] + [item() for _ in range(rng.randint(1, 2))]
    items = [i for i in items if i != "*"] or ["*"]
    return ",".join(items)


def covers_all(f, lo, hi):
    got = set()
    for item in f.split(","):
        for i, name in enumerate(DAYS):
            item = item.replace(name, str(i))
        rng_part, _, step = item.partition("/")
        if rng_part == "*":
            a, b = lo, hi
        elif "-" in rng_part:
            a, b = (int(x) for x in rng_part.split("-"))
        else:
            a = int(rng_part)
            b = hi if step else a
        got.update(range(a, b + 1, int(step) if step else 1))
    return got >= set(range(lo, hi + 1))


def expression(rng):
    minute = field(rng, 0, 59)
    # Hours near the changes (0-4) most of the time: that is where the
    # rule matters.
    hour = field(rng, 0, 4) if rng.random() < 0.6 else field(rng, 0, 23)
    dom = "*" if rng.random() < 0.6 else field(rng, 1, 31)
    month = "*" if rng.random() < 0.7 else field(rng, 1, 12, MONTHS)
    dow = "*" if rng.random() < 0.6 else field(rng, 0, 6, DAYS)
    # croniter takes a day field whose list covers every value as '*'
    # (so the other day field alone decides); cron, Kubernetes and
    # Runledger take only '*' itself so, and a restricted list ORs with the
    # other field. Such lists are drawn again.
    while dow != "*" and covers_all(dow, 0, 6):
        dow = field(rng, 0, 6, DAYS)
    while dom != "*" and covers_all(dom, 1, 31):
        dom = field(rng, 1, 31)
    return " ".join([minute, hour, dom, month, dow])


def croniter_naive(expr, start_local, end_local, limit):
    """Yields the wall-clock matches, lazily: the caller stops at its
    limit, and a list built first would walk every minute of the span for
    a '* * * * *'-like expression."""
    it = croniter(expr, start_local)
    for _ in range(limit):
        n = it.get_next(dt.datetime)
        if n > end_local:
            return
        yield n


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261206
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    rng = random.Random(seed)
    trans = {z: transitions(z) for z in ZONES}
    cases = []
    for i in range(count):
        zone = ZONES[i % len(ZONES)]
        # Mostly around a change (Kathmandu's one, to +05:45, is in
        # 1986); some anywhere, for the fixed offsets between them.
        if rng.random() < 0.8:
            t, jump = rng.choice(trans[zone])
        else:
            t, jump = rng.randint(1262304000, 1893456000), 0
        after = t - rng.randint(0, 3 * 86400)
        until = t + 3 * 86400 + abs(jump)
        cases.append((expression(rng), zone, after, until, 96))
    proc = subprocess.run(
        [tool], input="".join("%s\t%s\t%d\t%d\t%d\n" % c for c in cases),
        capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    if len(lines) != len(cases):
        sys.exit("cron_windows answered %d lines for %d cases"
                 % (len(lines), len(cases)))
    fails = 0
    fires = skipped = near_differ = 0
    for (expr, zone, after, until, limit), line in zip(cases, lines):
        if line.startswith("error:"):
            # Only expressions that can never match are refused; croniter
            # must find none in eight years either.
            try:
                croniter(expr, dt.datetime(2020, 1, 1)).get_next(dt.datetime)
                fails += 1
                print("seed %d: %r refused: %s" % (seed, expr, line))
            except Exception:
                pass
            continue
        ours = [int(x) for x in line.split()]
        z = zoneinfo.ZoneInfo(zone)
        # Wall-clock matches from a little before `after`, mapped by the
        # rule; keep those past `after`, one per instant, in order.
        a_local = dt.datetime.fromtimestamp(after - 2 * 86400, z).replace(
            tzinfo=None)
        u_local = dt.datetime.fromtimestamp(until + 2 * 86400, z).replace(
            tzinfo=None)
        want = []
        for n in croniter_naive(expr, a_local, u_local, 20000):
            u = rule_utc(n, z)
            if u <= after or u > until or (want and u == want[-1]):
                continue
            if want and u < want[-1]:
                fails += 1
                print("seed %d: rule not monotonic for %r in %s at %s"
                      % (seed, expr, zone, n))
                break
            want.append(u)
            if len(want) == limit:
                break
        fires += len(ours)
        if ours != want:
            fails += 1
            print("seed %d: %r in %s after %d: ours %s\n  rule %s"
                  % (seed, expr, zone, after, ours[:12], want[:12]))
            continue
        # croniter's zone-aware answer, away from the transitions.
        it = croniter(expr, dt.datetime.fromtimestamp(after, z))
        theirs = []
        while len(theirs) < limit:
            n = int(it.get_next(dt.datetime).timestamp())
            if n > until:
                break
            theirs.append(n)

        def near(u):
            return any(abs(u - t) <= abs(j) + 7200 for t, j in trans[zone])

        if len(theirs) == limit or len(ours) == limit:
            # A capped list ends at different places when the rules
            # differ; compare up to the earlier end.
            end = min(theirs[-1] if theirs else until,
                      ours[-1] if ours else until)
            theirs = [u for u in theirs if u <= end]
            ours = [u for u in ours if u <= end]
        a = [u for u in ours if not near(u)]
        b = [u for u in theirs if not near(u)]
        skipped += len(ours) - len(a)
        if [u for u in ours if near(u)] != [u for u in theirs if near(u)]:
            near_differ += 1
        if a != b:
            fails += 1
            print("seed %d: %r in %s after %d: ours %s\n  croniter %s"
                  % (seed, expr, zone, after, a[:12], b[:12]))
    print("%d expressions, %d window starts compared; %d starts near a "
          "transition left out of the croniter comparison, %d expressions "
          "where croniter differs there by its own rule; %d failures"
          % (len(cases), fires, skipped, near_differ, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
