"""Counts lines, words and characters of a workspace file (a Keel command tool)."""
import json
import os
import sys

args = json.load(sys.stdin)
root = os.path.realpath(os.environ.get("KEEL_WORKSPACE", "."))
path = os.path.realpath(os.path.join(root, args["path"]))
if not path.startswith(root + os.sep):
    print(f"path {args['path']!r} is outside the workspace", file=sys.stderr)
    sys.exit(1)
with open(path, encoding="utf-8") as f:
    text = f.read()
json.dump({"path": args["path"], "lines": text.count("\n"), "words": len(text.split()), "chars": len(text)}, sys.stdout)
