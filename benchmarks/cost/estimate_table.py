#!/usr/bin/env python3
"""The accuracy table of bench_estimate.sh from `hpcrl trace summarize --json --estimate` documents.

    estimate_table.py DIR FIT RUN:RANKS ...

For each RUN, DIR/RUN.calibrated.json and DIR/RUN.fitted.json (the same run estimated with the
calibrated and with the fitted profile). FIT: the comma-separated RUN or RUN@STAGE the profile was
fitted on; every other row is held out. Prints a Markdown table per stage (its step row) and one
per span.
"""
import json
import sys


def load(path):
    return {(r["stage"], r["span"]): r for r in json.load(open(path))["estimate"]["rows"]}


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    out = sys.argv[1]
    fitted_on = set(sys.argv[2].split(","))
    runs = [a.split(":") for a in sys.argv[3:]]
    stage_rows, span_rows = [], []
    for name, ranks in runs:
        cal, fit = load(f"{out}/{name}.calibrated.json"), load(f"{out}/{name}.fitted.json")
        for key, c in cal.items():
            f = fit[key]
            m = c["measured_s"]
            if not c["samples"] or m is None:
                continue
            role = "fit" if name in fitted_on or f"{name}@{key[0]}" in fitted_on else "held out"
            row = (name, key[0], key[1], ranks, m, c["predicted_s"], f["predicted_s"], role, c["samples"])
            (stage_rows if key[1].endswith(("/iteration", "/step")) else span_rows).append(row)

    def table(rows, what):
        print(f"| run | stage | {what} | ranks | measured s (median) | calibrated s | ratio | fitted s | ratio | "
              "fitted on it? | samples |")
        print("|---|---|---|--:|--:|--:|--:|--:|--:|---|--:|")
        for name, stage, span, ranks, m, c, f, role, n in rows:
            rc = None if c is None else c / m
            rf = None if f is None else f / m
            print(f"| {name} | {stage} | {span} | {ranks} | {m:.4g} | {fmt(c, '.4g')} | {fmt(rc, '.2f')} | "
                  f"{fmt(f, '.4g')} | {fmt(rf, '.2f')} | {role} | {n} |")

    table(stage_rows, "per step/iteration")
    print()
    table(span_rows, "span")
    return 0


if __name__ == "__main__":
    sys.exit(main())
