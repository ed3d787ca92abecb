#!/usr/bin/env python3
"""Checks the commit messages since the rule began (CONTRIBUTING.md, "Commits"): a subject of at
most 72 characters, then a blank line and a body saying why. Merge commits are exempt. Commits
before BASE are not checked: their subjects were written before the rule.

  python3 scripts/check-commits.py [REV]   check BASE..REV (default HEAD); one line per
                                           violation, then cargo's "test result:" line
"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASE = "9468c4d6d8ccd2eddf9ef2da36ce4b50e391257f"  # the last commit before the rule; everything after it is checked
MAX_SUBJECT = 72


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    try:
        subprocess.run(["git", "cat-file", "-e", BASE + "^{commit}"], check=True,
                       capture_output=True, cwd=ROOT)
    except (subprocess.CalledProcessError, FileNotFoundError):
        # A shallow clone without the base, or a release archive without git: nothing to check.
        print(f"skipped: {BASE} is not in this tree's history (or git is missing)")
        print("test result: ok. 0 passed; 0 failed; 1 ignored")
        return 0
    out = subprocess.run(["git", "log", "--no-merges", "--format=%H%x00%B%x01",
                          f"{BASE}..{rev}"], check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout
    bad = 0
    commits = [c.strip("\n") for c in out.split("\x01") if c.strip()]
    for c in commits:
        sha, msg = c.split("\x00", 1)
        lines = msg.strip("\n").split("\n")
        subject = lines[0]
        problems = []
        if len(subject) > MAX_SUBJECT:
            problems.append(f"subject of {len(subject)} characters (at most {MAX_SUBJECT})")
        if len(lines) < 3 or lines[1] != "" or not "".join(lines[2:]).strip():
            problems.append("no body after a blank line")
        for p in problems:
            print(f"{sha[:10]} {subject[:60]!r}: {p}")
        bad += bool(problems)
    print(f"test result: {'ok' if bad == 0 else 'FAILED'}. {len(commits) - bad} passed; "
          f"{bad} failed; 0 ignored")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
