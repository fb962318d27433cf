"""Counts changes by kind: one change per line (a commit subject or a pull request title),
read from the file named as the first argument, or from stdin. Prints JSON, e.g.
{"total": 5, "by_kind": {"feat": 2, "fix": 3}}."""

import json
import re
import sys

KINDS = ("feat", "fix", "docs", "perf", "refactor", "test", "chore")


def kind_of(line):
    match = re.match(r"\s*[-*]?\s*(\w+)(\([^)]*\))?!?:", line)
    if match and match.group(1).lower() in KINDS:
        return match.group(1).lower()
    return "other"


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    else:
        lines = sys.stdin.read().splitlines()
    counts = {}
    for line in lines:
        if line.strip():
            kind = kind_of(line)
            counts[kind] = counts.get(kind, 0) + 1
    print(json.dumps({"total": sum(counts.values()), "by_kind": counts}))


if __name__ == "__main__":
    main()
