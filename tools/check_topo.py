#!/usr/bin/env python3
"""tools/check_topo.py TOPO -- the CTest check of tickwheel-topo (tools.topo).

Runs TOPO (the text report), then `TOPO --shards 3 --json` and `TOPO --shards 3 --cpus P,Q --json`,
and checks that each exits 0, the JSON parses, and the plan follows the engine's rule for the
topology the same run reports: shard i on cpus[i % len(cpus)], else on the first PU of core
i % cores. Binding may be refused on this machine (a container); then each shard must say why.
Exit status 0 on success, 1 with the reason otherwise.
"""
import json
import subprocess
import sys


def run(topo, *args):
    result = subprocess.run([topo, *args], capture_output=True, text=True, timeout=50)
    if result.returncode != 0:
        command = " ".join([topo, *args])
        sys.exit(f"{command} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result.stdout


def check_plan(report, cpus):
    plan = report["plan"]
    shards = plan["shards"]
    if len(shards) != 3:
        sys.exit(f"--shards 3 planned {len(shards)} shards")
    first_pus = [core["pus"][0] for core in report["cores"]]
    for i, shard in enumerate(shards):
        want = cpus[i % len(cpus)] if cpus else first_pus[i % len(first_pus)]
        if shard["shard"] != i or shard["pu"] != want:
            sys.exit(f"shard {i}: planned on PU {shard['pu']}, the engine's rule gives {want}")
        if shard["bound"] != (shard["error"] is None):
            sys.exit(f"shard {i}: bound={shard['bound']} but error={shard['error']!r}")
        if shard["bound"] and shard["ran_on"] != want:
            sys.exit(f"shard {i}: bound to PU {want} but ran on {shard['ran_on']}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_topo.py TOPO")
    topo = sys.argv[1]
    text = run(topo)
    if "engine plan:" not in text:
        sys.exit(f"the text report has no plan:\n{text}")

    report = json.loads(run(topo, "--shards", "3", "--json"))
    if not report["cores"] or report["pu_count"] < len(report["cores"]):
        sys.exit(f"implausible topology: {report['cores']}, {report['pu_count']} PUs")
    check_plan(report, [])

    # Two PUs that exist here (the same one twice on a one-PU machine), in reverse order.
    pus = sorted(pu for core in report["cores"] for pu in core["pus"])
    cpus = [pus[-1], pus[0]]
    report = json.loads(run(topo, "--shards", "3", "--cpus", ",".join(map(str, cpus)), "--json"))
    check_plan(report, cpus)
    print(text, end="")


if __name__ == "__main__":
    main()
