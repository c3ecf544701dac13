#!/usr/bin/env python3
"""Checks the dependency rule of src/ (docs/architecture.md, "Layers"):
every #include of ours names its folder ("core/buf.h"), and a file only
includes headers of its own layer or a lower one; no two files include
each other. Run by ctest (test `layers`); exits 1 with one line per
violation."""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Lower numbers are lower layers. A folder's subfolders share its layer.
LAYERS = {
    "core": 0,
    "store": 1, "http": 1, "net": 1,
    "identity": 2, "cluster": 2,
    "events": 3, "portfolio": 3, "rates": 3, "pms": 3, "webhooks": 3, "feeds": 3,
    "sched": 3, "operations": 3, "guests": 3,
    "api": 4,
    "ops": 5,
    "": 6,  # src/main.c
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    """The layer of a path relative to src/, or None for an unknown folder."""
    top = rel.split("/", 1)[0] if "/" in rel else ""
    return LAYERS.get(top)


def main():
    problems = []
    edges = set()
    for dirpath, _, names in os.walk(ROOT):
        for name in sorted(names):
            if not name.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
            mine = layer_of(rel)
            if mine is None:
                problems.append("%s: folder not in the layer table" % rel)
                continue
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                if "/" not in inc:
                    problems.append('%s: #include "%s" does not name its folder' % (rel, inc))
                    continue
                if not os.path.exists(os.path.join(ROOT, inc)):
                    problems.append('%s: #include "%s": no such file under src/' % (rel, inc))
                    continue
                theirs = layer_of(inc)
                if theirs is None or theirs > mine:
                    problems.append('%s (layer %d) includes %s (layer %s): a lower layer may not '
                                    'include a higher one' % (rel, mine, inc, theirs))
                edges.add((rel, inc))
    for a, b in sorted(edges):
        if (b, a) in edges and a < b:
            problems.append("%s and %s include each other" % (a, b))
    for p in problems:
        print(p)
    if problems:
        print("%d layer violation(s); see docs/architecture.md, Layers" % len(problems))
        return 1
    print("layers: every include points down or sideways within its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
