#!/usr/bin/env python3
"""CPU seconds used by groups of processes over a measurement window.

  cpu.py snap FILE GROUP=PID[,PID...] ...   record each process's CPU now
  cpu.py delta FILE GROUP=PID[,PID...] ...  print cpu_s_GROUP=... fields

A group's figure is the CPU (user + system) its processes used between the
two calls: a process seen in both counts its difference, one that started
in between counts all it used, one that ended in between counts what it
had used by the snapshot (nothing after). "all" in the delta adds the
machine's busy time from /proc/stat (every process, the kernel included).
Used by bench.sh, which passes PostgreSQL's postmaster and its children,
the Kafka broker, the stub and the process measured.
"""
import json
import os
import sys

HZ = os.sysconf("SC_CLK_TCK")


def ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # after "pid (comm)": state is fields[0]; utime, stime are 14, 15
        # of the full line, i.e. fields[11], fields[12]
        return int(fields[11]) + int(fields[12])
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
        snap = {"machine": machine_busy(),
                "pids": {p: ticks(p) for g in gs.values() for p in g}}
        with open(path, "w") as f:
            json.dump(snap, f)
        return
    with open(path) as f:
        snap = json.load(f)
    before = snap["pids"]
    fields = []
    for name, pids in gs.items():
        used = 0
        for p in set(pids):
            now = ticks(p)
            if now is None:
                continue
            used += now - (before.get(p) or 0)
        fields.append(f"cpu_s_{name}={used / HZ:.2f}")
    fields.append(f"cpu_s_all={(machine_busy() - snap['machine']) / HZ:.2f}")
    print(" ".join(fields))


if __name__ == "__main__":
    main()
