#!/usr/bin/env python3
"""Peer for the differential tests of DiffMatchPatch: runs PyPI's diff-match-patch.

Reads {"cases": [{"a": ..., "b": ..., "target": ...}, ...]} as JSON on stdin and writes one
JSON object per case (a list, in order) on stdout, computed with Diff_Timeout = 0:

  diff            diff_main(a, b, checklines=False) as [[op, text], ...]
  diffLines       diff_main(a, b, checklines=True)
  delta           diff_toDelta(diff)
  patchFromDiffs  patch_toText(patch_make(a, diff))   (no cleanup involved)
  patchText       patch_toText(patch_make(a, b))      (semantic and efficiency cleanups)
  applySelf       patch_apply(patch_make(a, b), a) as [text, [bool, ...]]
  applyTarget     patch_apply(patch_make(a, b), target)

Exits 3 when the package is missing, so the caller can tell that apart from a failure.
"""
import json
import sys

try:
    from diff_match_patch import diff_match_patch
except ImportError:
    sys.stderr.write("dmp-python-peer: the diff-match-patch package is not installed\n")
    sys.exit(3)


def main():
    request = json.load(sys.stdin)
    dmp = diff_match_patch()
    dmp.Diff_Timeout = 0
    results = []
    for case in request["cases"]:
        a, b, target = case["a"], case["b"], case["target"]
        diff = dmp.diff_main(a, b, False)
        diff_lines = dmp.diff_main(a, b, True)
        patches = dmp.patch_make(a, b)
        apply_self = dmp.patch_apply(patches, a)
        apply_target = dmp.patch_apply(patches, target)
        results.append({
            "diff": [[op, text] for op, text in diff],
            "diffLines": [[op, text] for op, text in diff_lines],
            "delta": dmp.diff_toDelta(diff),
            "patchFromDiffs": dmp.patch_toText(dmp.patch_make(a, diff)),
            "patchText": dmp.patch_toText(patches),
            "applySelf": [apply_self[0], list(apply_self[1])],
            "applyTarget": [apply_target[0], list(apply_target[1])],
        })
    json.dump(results, sys.stdout, ensure_ascii=True)


if __name__ == "__main__":
    main()
