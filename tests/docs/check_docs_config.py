#!/usr/bin/env python3
"""docs/configuration.md documents exactly the settings `runledger config` knows.

The table in config.c is the source of truth. Two directions are checked:

- every row `runledger config` prints appears verbatim in the document's
  reference table (a setting added to config.c and not documented, or
  documented with another default or description, fails);
- every row of that table, and every setting name the document mentions
  anywhere, is one the binary knows (a setting removed or renamed in
  config.c and still documented fails).

Names under a documented wildcard row (`RUNLEDGER_KAFKA_*`: librdkafka
properties passed through) and the few variables read outside the table
(READ_OUTSIDE_TABLE) count as known.

usage: check_docs_config.py RUNLEDGER_BINARY docs/configuration.md"""
import re
import subprocess
import sys

# Read by config.c itself, before the table applies: the file of NAME=value
# lines. Not a setting, so `runledger config` does not list it.
READ_OUTSIDE_TABLE = {"RUNLEDGER_CONFIG_FILE"}

HEADER = "| name | default | description |"
NAME_RE = re.compile(r"\b((?:RUNLEDGER|MODEL|KAFKA)_[A-Z0-9_]*(?:[A-Z0-9]|_\*))")


def table_rows(lines):
    """The rows of the first table whose header is HEADER."""
    rows = []
    inside = False
    for line in lines:
        line = line.rstrip()
        if not inside:
            inside = line == HEADER
            continue
        if not line.startswith("|"):
            break
        if line.startswith("| `"):
            rows.append(line)
    return rows


def row_name(row):
    return row.split("`")[1]


def main():
    if len(sys.argv) != 3:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    binary, doc_path = sys.argv[1], sys.argv[2]
    printed = subprocess.run([binary, "config"], check=True,
                             capture_output=True, text=True).stdout
    known_rows = table_rows(printed.splitlines())
    if not known_rows:
        print("`runledger config` printed no table headed " + HEADER)
        return 1
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    doc_rows = table_rows(doc.splitlines())

    known_names = {row_name(r) for r in known_rows}
    wildcards = [n[:-1] for n in known_names if n.endswith("*")]

    def is_known(name):
        return (name in known_names or name in READ_OUTSIDE_TABLE
                or any(name.startswith(w) for w in wildcards))

    failures = []
    documented = set(doc_rows)
    for row in known_rows:
        if row not in documented:
            failures.append("lacks or differs in: " + row)
    known_set = set(known_rows)
    for row in doc_rows:
        if row not in known_set:
            failures.append("documents a row the binary does not print: "
                            + row)
    for name in sorted(set(NAME_RE.findall(doc))):
        if not is_known(name):
            failures.append("mentions a setting the binary does not know: "
                            + name)

    for failure in failures:
        print("%s %s" % (doc_path, failure))
    print("%d of %d configuration rows documented, %d documented rows, "
          "%d problems" % (len(known_rows) - sum(
              1 for f in failures if f.startswith("lacks")),
                           len(known_rows), len(doc_rows), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
