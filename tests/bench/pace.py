#!/usr/bin/env python3
"""Copies the lines of FILE to stdout at RATE lines per second.

Used by bench.sh to feed `kcat -P` at a steady rate (the paced and soak
scenarios) instead of all at once: every 10 ms it writes the lines that are
due by then and flushes, so the broker sees an even stream. Stops at the
end of FILE or after --seconds, whichever comes first; prints the lines
written and the seconds taken to stderr.
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--rate", type=float, required=True, help="lines/s")
    ap.add_argument("--seconds", type=float, default=0,
                    help="stop after this long (0: at the end of the file)")
    args = ap.parse_args()
    if args.rate <= 0:
        ap.error("--rate must be positive")

    out = sys.stdout
    written = 0
    start = time.monotonic()
    with open(args.file, encoding="utf-8") as f:
        done = False
        while not done:
            elapsed = time.monotonic() - start
            if args.seconds and elapsed >= args.seconds:
                break
            due = int(elapsed * args.rate) + 1
            while written < due:
                line = f.readline()
                if not line:
                    done = True
                    break
                out.write(line)
                written += 1
            out.flush()
            if not done:
                time.sleep(0.01)
    print(f"pace: {written} lines in {time.monotonic() - start:.2f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
