"""Compares two junit files of test_dist_backend.py: the tests each passed, and those the first
(Gloo as a plugin) passed that the second (coll) did not, with coll's first line of failure."""

import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        kinds = [c.tag for c in case]
        if "failure" in kinds or "error" in kinds:
            node = case.find("failure") if case.find("failure") is not None else case.find("error")
            text = (node.get("message") or node.text or "").strip().splitlines()
            out[name] = ("failed", text[0][:200] if text else "")
        elif "skipped" in kinds:
            out[name] = ("skipped", "")
        else:
            out[name] = ("passed", "")
    return out


base, coll = outcomes(sys.argv[1]), outcomes(sys.argv[2])
passed_base = {n for n, (k, _) in base.items() if k == "passed"}
passed_coll = {n for n, (k, _) in coll.items() if k == "passed"}
print(f"gloo_plugin passed {len(passed_base)} of {len(base)}; coll passed {len(passed_coll)} of {len(coll)}; "
      f"coll passes {len(passed_base & passed_coll)} of the {len(passed_base)} gloo_plugin passes")
for n in sorted(passed_base - passed_coll):
    kind, why = coll.get(n, ("missing", ""))
    print(f"  not passed by coll: {n}: {kind} {why}")
for n in sorted(passed_coll - passed_base):
    print(f"  passed by coll only: {n}")
