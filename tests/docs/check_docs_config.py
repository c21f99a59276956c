#!/usr/bin/env python3
"""README's configuration table is the one `runledger config` prints.

The table in config.c is the source of truth; a setting added there and not
documented (or documented with another default) fails this test."""
import subprocess
import sys

binary, readme = sys.argv[1], sys.argv[2]
table = subprocess.run([binary, "config"], check=True, capture_output=True,
                       text=True).stdout.splitlines()
with open(readme, encoding="utf-8") as f:
    documented = set(line.rstrip() for line in f)
missing = [row for row in table if row.startswith("| `")
           and row.rstrip() not in documented]
for row in missing:
    print("README.md lacks or differs in: " + row)
rows = sum(1 for row in table if row.startswith("| `"))
print("%d of %d configuration rows documented" % (rows - len(missing), rows))
sys.exit(1 if missing else 0)
