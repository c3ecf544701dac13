"""Helpers shared by the bench report scripts (bench/decisions_report.py,
bench/webhooks_report.py); standard library only. Not run by itself: the
scripts put their own directory (bench/) on sys.path and import it.
"""
import os
import re
import sys

import wrk_report  # (check(): non-2xx answers and socket errors in a wrk output)


def check_status(path, expected="the expected status"):
    """Exit status (0 or 1) for the wrk output at path, written with a bench
    wrk script (bench/common.lua's expect_status()): 1, and why on stderr,
    when its "bench-bad-status" line is missing (the script did not finish)
    or not 0 (answers other than EXPECTED, named in the message), or when
    wrk_report.check() finds non-2xx answers or socket errors."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    m = re.search(r"^bench-bad-status: (\d+)", text, re.M)
    rc = wrk_report.check(path)
    if not m:
        print("FAIL %s: no bench-bad-status line (the wrk script did not finish)"
              % os.path.basename(path), file=sys.stderr)
        return 1
    if int(m.group(1)):
        first = re.search(r"^bench-first-bad: (.*)$", text, re.M)
        print("FAIL %s: %s answers were not %s; first: %s"
              % (os.path.basename(path), m.group(1), expected,
                 first.group(1) if first else "?"),
              file=sys.stderr)
        return 1
    return rc
