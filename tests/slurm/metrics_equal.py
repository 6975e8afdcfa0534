#!/usr/bin/env python3
"""metrics_equal.py A B: exit 0 when two runs' metrics.jsonl are equal line for line,
timing fields aside ("time", "tokens_per_s", every "seconds/...") and the machine's memory
readings (every "memory/..."), else exit 1 naming the first line that differs. Used by
tests/slurm/slurm_e2e.sh and two_node_slurm.sh."""
import json
import sys

TIMING = ("time", "tokens_per_s")


def load(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                out.append({k: v for k, v in row.items()
                            if k not in TIMING and not k.startswith(("seconds/", "memory/"))})
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: metrics_equal.py A/metrics.jsonl B/metrics.jsonl")
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if a == b:
        print(f"metrics.jsonl: {len(a)} lines, equal (timing fields aside)")
        return 0
    print(f"{len(a)} lines in {sys.argv[1]}, {len(b)} in {sys.argv[2]}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            print(f"first difference at line {i + 1}:\n  {x}\n  {y}")
            break
    return 1


if __name__ == "__main__":
    sys.exit(main())
