#!/usr/bin/env python3
"""ctest temp-folders/reset and temp-folders/leftovers: every test runs with
$TMPDIR set to one folder of the build (tests/CMakeLists.txt
relax_test_tmpdir); the first empties it before any test, the second runs
after all of them and fails naming whatever a test, a tool or a child left
there: a folder not removed on an error path, a crash's leftovers, a
package half written.

  test_temp_leftovers.py --reset DIR
  test_temp_leftovers.py --check DIR
"""

import argparse
import os
import shutil
import sys


def main():
    ap = argparse.ArgumentParser()
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--reset", metavar="DIR", help="make DIR an empty folder")
    mode.add_argument("--check", metavar="DIR", help="fail when DIR holds anything")
    args = ap.parse_args()
    if args.reset:
        shutil.rmtree(args.reset, ignore_errors=True)
        os.makedirs(args.reset)
        print(f"{args.reset}: empty")
        return 0
    if not os.path.isdir(args.check):
        print(f"FAIL: {args.check} is gone (a test removed the shared $TMPDIR)")
        return 1
    left = sorted(os.listdir(args.check))
    if left:
        print(f"FAIL: {len(left)} entries left in the tests' $TMPDIR {args.check}:")
        for name in left[:40]:
            p = os.path.join(args.check, name)
            kind = "folder" if os.path.isdir(p) and not os.path.islink(p) else "file"
            print(f"  {name} ({kind})")
        return 1
    print(f"nothing left in {args.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
