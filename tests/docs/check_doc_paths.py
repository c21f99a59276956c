#!/usr/bin/env python3
"""Fails when a document names a repository path that does not exist.

Usage: check_doc_paths.py ROOT

Reads README.md, docs/*.md, schema/README.md, tests/README.md,
tests/*/README.md and helm/runledger/README.md under ROOT, and every
token in them that looks like a path inside the repository: it starts
with common/, consumer/, schema/, tests/, docs/ or helm/ (or is a
relative link such as ../schema/README.md), optionally followed by
:LINE or #anchor. Such a path must exist as a file or folder; schema/NNN
names the migration of that number, and a test may be named by its
target (tests/ops/test_ops_x for tests/ops/test_ops_x.c). A path
with a wildcard or a placeholder (*, NNN, <...>, ...) is a pattern, not
a file, and is skipped; so are URLs.
"""
import os
import re
import sys

ROOTS = ("common/", "consumer/", "schema/", "tests/", "docs/", "helm/")
TOKEN = re.compile(r"[A-Za-z0-9_./<>*{}-]+")


def documents(root):
    docs = ["README.md", "schema/README.md", "tests/README.md",
            "helm/runledger/README.md"]
    for name in sorted(os.listdir(os.path.join(root, "docs"))):
        if name.endswith(".md"):
            docs.append("docs/" + name)
    tests = os.path.join(root, "tests")
    for name in sorted(os.listdir(tests)):
        if os.path.isfile(os.path.join(tests, name, "README.md")):
            docs.append("tests/%s/README.md" % name)
    return [d for d in docs if os.path.isfile(os.path.join(root, d))]


def candidates(doc, text):
    base = os.path.dirname(doc)
    for m in re.finditer(r"\]\(([^)#\s]+)", text):
        target = m.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        yield os.path.normpath(os.path.join(base, target)), target
    for m in TOKEN.finditer(text):
        tok = m.group(0).rstrip(".,;:)")
        if tok.startswith("./"):
            tok = tok[2:]
        if not tok.startswith(ROOTS):
            continue
        start = m.start()
        if start > 0 and text[start - 1] in "/.@~$":
            continue  # part of a longer path or a URL
        yield tok, tok


def exists(root, path):
    """A path, a migration named by its number (schema/015), or a test
    named by its target (tests/ops/test_ops_x for test_ops_x.c)."""
    full = os.path.join(root, path)
    if os.path.exists(full) or os.path.exists(full + ".c"):
        return True
    m = re.fullmatch(r"schema/(\d{3})", path)
    if m:
        return any(n.startswith(m.group(1) + "_")
                   for n in os.listdir(os.path.join(root, "schema")))
    return False


def is_pattern(path):
    return any(c in path for c in "*<>{}") or "NNN" in path or "..." in path


def main():
    root = sys.argv[1]
    missing = []
    checked = 0
    for doc in documents(root):
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        for path, shown in candidates(doc, text):
            path = path.split("#")[0].split(":")[0].rstrip("/")
            if not path or is_pattern(path) or path.startswith(".."):
                continue
            checked += 1
            if not exists(root, path):
                missing.append("%s: %s" % (doc, shown))
    for line in sorted(set(missing)):
        print("names a missing path: " + line)
    print("%d path mentions checked, %d missing" % (checked,
                                                   len(set(missing))))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
