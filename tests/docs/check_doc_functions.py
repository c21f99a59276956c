#!/usr/bin/env python3
"""Fails when docs/internals.md names a function in a file that does not
define it.

Usage: check_doc_functions.py ROOT [DOC ...]

The walk of one run names a function and then the file that holds it:
"`intake` (consumer/consume.c)", "`a` and `b` (consumer/x.c)",
"`rl_ledger_main`, consumer/ledger/loop.c" (the threads table) or
"`store_input` → `rl_db_store_raw_input`, common/src/db/lease.c". Only
the backticked names right before the file are claims about it (in a
chain, the last one). A .c file must define the name: a line that starts
with it and an opening parenthesis (the house style puts a definition's
return type on a line of its own), or `struct NAME {` / `enum NAME {`; a
name ending in `*` (`rl_item_*`) needs one definition with that prefix.
A .h file must declare it. Whoever moves a function fails this test until
the page says where it went.
"""
import os
import re
import sys

NAME = r"(?:struct |enum )?[A-Za-z_][A-Za-z0-9_]*\*?"
PATH = r"(?:common|consumer|tests)/[A-Za-z0-9_/.-]+\.[ch]"
# `a` (path) | `a`, path | `a` and `b` (path) | `a` / `b` (path)
CLAIM = re.compile(
    r"((?:`" + NAME + r"`(?:\(\))?(?:,\s*|\s*/\s*|\s+and\s+|\s+or\s+))*`" + NAME +
    r"`(?:\(\))?)\s*(?:\(|,\s*)(" + PATH + r")")
ONE = re.compile(r"`(" + NAME + r")`")


def defines(text, name, header):
    if name.startswith(("struct ", "enum ")):
        return re.search(r"^\s*" + re.escape(name) + r"\s*\{", text,
                         re.M) is not None
    glob = name.endswith("*")
    stem = re.escape(name.rstrip("*")) + (r"[A-Za-z0-9_]*" if glob else "")
    if header:
        return re.search(r"\b" + stem + r"\s*\(", text) is not None or \
            re.search(r"\b" + stem + r"\b", text) is not None
    # a definition at the start of a line, or a function-like macro
    return re.search(r"^" + stem + r"\s*\(", text, re.M) is not None or \
        re.search(r"^#define\s+" + stem + r"\b", text, re.M) is not None


def claims(text):
    flat = re.sub(r"\s+", " ", text)
    for m in CLAIM.finditer(flat):
        names = ONE.findall(m.group(1))
        # a chain "`x` → `y`, path" reaches here as `y` alone: the regex
        # only joins names by commas, "and" and "or"
        for name in names:
            yield name, m.group(2)


def main(argv):
    root = argv[1]
    docs = argv[2:] or ["docs/internals.md"]
    failures = 0
    checked = 0
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        seen = set()
        for name, path in claims(text):
            if (name, path) in seen:
                continue
            seen.add((name, path))
            full = os.path.join(root, path)
            if not os.path.isfile(full):
                print("%s: `%s` is said to be in %s, which does not exist" %
                      (doc, name, path))
                failures += 1
                continue
            with open(full, encoding="utf-8", errors="replace") as f:
                src = f.read()
            checked += 1
            if not defines(src, name, path.endswith(".h")):
                print("%s: `%s` is said to be in %s, which does not %s it" %
                      (doc, name, path,
                       "declare" if path.endswith(".h") else "define"))
                failures += 1
    print("%d names checked against their files, %d wrong" %
          (checked, failures))
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
