#!/usr/bin/env python3
"""Fits a calibrated profile's three rates to measured runs: the cost model's calibration step.

    fit_profile.py --hpcrl BIN --profile cpu-1.yaml --runs RUN[@STAGE]... --out cpu-1-fitted.yaml
                   [--also cpu-2.yaml:cpu-2-fitted.yaml ...]

`hpcrl calibrate` measures the machine's matmul rates, element-wise bandwidth and
per-op overhead with micro-benchmarks; a model's layers reach different rates
(other shapes, allocator state, the autograd engine). This scales the three --
matmul FLOP/s (compute.efficiency, or the by_width rates above 1), the
element-wise bandwidth and kernel_overhead_s (with eager_op_s and train_op_s where
the profile has them) -- by the factors that make
`hpcrl trace summarize RUN --json --estimate PROFILE` predict the given runs'
spans best: minimum sum of log(predicted / measured)^2 over every row that was
both measured and modelled (the step rows and their spans; RUN@STAGE: only that
stage's rows). Coordinate search
in log2 steps of 1/2, 1/4, ..., 1/64. Prints the factors and the fitted rows.
--also applies the same factors to other profiles (the 2-rank one).
"""
import argparse
import json
import math
import re
import subprocess
import sys
import tempfile

NUM = r"([0-9.eE+-]+)"


def read_values(text):
    eff = float(re.search(r"compute: \{peak_flops: " + NUM + r", efficiency: " + NUM, text).group(2))
    elem = float(re.search(r"elementwise_bandwidth: " + NUM, text).group(1))
    over = float(re.search(r"kernel_overhead_s: " + NUM, text).group(1))
    return eff, elem, over


def scaled(text, factors, name):
    """The profile text with matmul rates x f0, element-wise bandwidth x f1, op overhead x f2."""
    f0, f1, f2 = factors
    eff, elem, over = read_values(text)
    rate_scale = max(1.0, eff * f0)  # efficiency stays <= 1; the rest goes into the measured rates
    text = re.sub(r"(compute: \{peak_flops: [^,]+, efficiency: )" + NUM,
                  lambda m: m.group(1) + f"{min(1.0, eff * f0):.6g}", text, count=1)
    if rate_scale > 1:
        block = re.search(r"by_width: \{([^}]*)\}", text)
        pairs = [p.split(":") for p in block.group(1).split(",")]
        new = ", ".join(f"{w.strip()}: {float(r) * rate_scale:.6g}" for w, r in pairs)
        text = text[:block.start(1)] + new + text[block.end(1):]
    text = re.sub(r"(elementwise_bandwidth: )" + NUM, lambda m: m.group(1) + f"{elem * f1:.6g}", text, count=1)
    text = re.sub(r"(kernel_overhead_s: )" + NUM, lambda m: m.group(1) + f"{over * f2:.6g}", text, count=1)
    # The measured per-op costs the estimate charges in its place, where the profile has them: the same factor.
    for key in ("eager_op_s", "train_op_s"):
        text = re.sub(r"^(" + key + r": )" + NUM, lambda m: m.group(1) + f"{float(m.group(2)) * f2:.6g}", text,
                      count=1, flags=re.M)
    text = re.sub(r"^name: .*$", f"name: {name}", text, count=1, flags=re.M)
    return text


def rows(hpcrl, run, profile_path):
    path, _, stage = run.partition("@")
    out = subprocess.run([hpcrl, "trace", "summarize", path, "--json", "--estimate", profile_path],
                         check=True, capture_output=True, text=True).stdout
    return [r for r in json.loads(out)["estimate"]["rows"] if not stage or r["stage"] == stage]


def usable(r):
    return r["samples"] and r["measured_s"] and r["predicted_s"] and r["measured_s"] > 0 and r["predicted_s"] > 0


def loss(hpcrl, runs, text):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    total = 0.0
    for run in runs:
        total += sum(math.log(r["predicted_s"] / r["measured_s"]) ** 2 for r in rows(hpcrl, run, f.name) if usable(r))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hpcrl", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--also", nargs="*", default=[], help="OTHER.yaml:OUT.yaml pairs the same factors apply to")
    a = ap.parse_args()
    base = open(a.profile).read()
    name = re.search(r"^name: (.*)$", base, re.M).group(1) + "-fitted"
    x = [0.0, 0.0, 0.0]  # log2 factors
    best = loss(a.hpcrl, a.runs, scaled(base, [2 ** v for v in x], name))
    for step in (0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625):
        improved = True
        while improved:
            improved = False
            for i in range(3):
                for d in (step, -step):
                    y = list(x)
                    y[i] += d
                    value = loss(a.hpcrl, a.runs, scaled(base, [2 ** v for v in y], name))
                    if value < best - 1e-12:
                        best, x, improved = value, y, True
    factors = [2 ** v for v in x]
    header = (f"# fitted by benchmarks/cost/fit_profile.py on {', '.join(a.runs)}:\n"
              f"# matmul rates x {factors[0]:.4g}, element-wise bandwidth x {factors[1]:.4g}, "
              f"op overhead x {factors[2]:.4g} (sum of squared log ratios {best:.4g})\n")
    open(a.out, "w").write(header + scaled(base, factors, name))
    for pair in a.also:
        src, dst = pair.split(":")
        text = open(src).read()
        other = re.search(r"^name: (.*)$", text, re.M).group(1) + "-fitted"
        open(dst, "w").write(header + scaled(text, factors, other))
    print(f"factors: matmul x {factors[0]:.4g}, element-wise x {factors[1]:.4g}, overhead x {factors[2]:.4g}; "
          f"sum of squared log ratios {best:.4g}")
    for run in a.runs:
        for r in rows(a.hpcrl, run, a.out):
            if usable(r):
                print(f"  {run}: {r['span']}: measured {r['measured_s']:.4g} s, fitted {r['predicted_s']:.4g} s "
                      f"({r['predicted_s'] / r['measured_s']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
