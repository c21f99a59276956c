#!/usr/bin/env python3
"""CPU seconds used by groups of processes over a measurement window.

  cpu.py snap FILE GROUP=PID[,PID...] ...   record each process's CPU now
  cpu.py delta FILE GROUP=PID[,PID...] ...  print cpu_s_GROUP=... fields

A group's figure is the CPU (user + system) its processes used between the
two calls, with what their children used once reaped: a process seen in
both counts its difference, one that started in between counts all it
used, and one that ended in between counts through its parent when the
parent is in the group (its use before the snapshot taken off), else not
at all. PostgreSQL's postmaster reaps its backends and autovacuum
workers, so a pgbench client's backend or an autovacuum worker that ends
inside the window counts; cpu_s_GROUP_reaped says how much of the figure
came that way (printed when not zero). "all" in the delta adds the
machine's busy time from /proc/stat (every process, the kernel included).
Used by bench.sh, which passes PostgreSQL's postmaster and its children,
the Kafka broker, the stub and the process measured.
"""
import json
import os
import sys

HZ = os.sysconf("SC_CLK_TCK")


def stat(pid):
    """(own CPU ticks, reaped children's CPU ticks, parent pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # after "pid (comm)": state is fields[0], ppid fields[1]; utime,
        # stime, cutime, cstime are 14-17 of the full line, fields[11:15]
        return (int(fields[11]) + int(fields[12]),
                int(fields[13]) + int(fields[14]), fields[1])
    except (OSError, IndexError, ValueError):
        return None


def machine_busy():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(p) for p in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals[:8]) - idle


def groups(args):
    out = {}
    for arg in args:
        name, _, pids = arg.partition("=")
        out[name] = [p for p in pids.replace(",", " ").split() if p.isdigit()]
    return out


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("snap", "delta"):
        sys.exit(__doc__)
    mode, path, gs = sys.argv[1], sys.argv[2], groups(sys.argv[3:])
    if mode == "snap":
        pids = {p: stat(p) for g in gs.values() for p in g}
        snap = {"machine": machine_busy(),
                "pids": {p: s[:2] for p, s in pids.items() if s},
                "ppids": {p: s[2] for p, s in pids.items() if s}}
        with open(path, "w") as f:
            json.dump(snap, f)
        return
    with open(path) as f:
        snap = json.load(f)
    before = snap["pids"]
    fields = []
    for name, pids in gs.items():
        used = reaped = 0
        for p in set(pids):
            now = stat(p)
            if now is None:
                continue
            own0, kids0 = before.get(p) or (0, 0)
            used += now[0] - own0
            reaped += now[1] - kids0
        # Ended in between under a parent of the group: the parent's
        # reaped-children figure holds its whole life.
        for p, parent in snap["ppids"].items():
            if parent in pids and p not in pids and stat(p) is None:
                reaped -= sum(before.get(p) or (0, 0))
        fields.append(f"cpu_s_{name}={(used + reaped) / HZ:.2f}")
        if reaped:
            fields.append(f"cpu_s_{name}_reaped={reaped / HZ:.2f}")
    fields.append(f"cpu_s_all={(machine_busy() - snap['machine']) / HZ:.2f}")
    print(" ".join(fields))


if __name__ == "__main__":
    main()
