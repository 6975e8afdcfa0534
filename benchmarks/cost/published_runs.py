#!/usr/bin/env python3
"""The cost model beside published GRPO/DAPO step times (docs/estimates.md, "Published runs").

    published_runs.py --hpcrl BIN [--fit] [--profiles DIR]

Each row: a published run (source and numbers in its configs/published/*.yaml header and in
docs/estimates.md), the hpcrl pipeline that describes it, the lengths it ran with, and the
published seconds per step. `hpcrl plan --estimate --json` predicts the step on the shipped
GPU profile. With --fit, the profile's compute efficiency is first set so that the rows marked
"fit" come out at their published time (bisection on the geometric mean of their ratios), the
fitted profile is written to DIR/<profile>-fitted.yaml, and every row is estimated with it; the
others are held out. Prints a Markdown table.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

NEMO = "configs/published/nemo-rl-llama3.1-8b-grpo-16xh100.yaml"
NEMO_1OFF = "configs/published/nemo-rl-llama3.1-8b-grpo-1off-16xh100.yaml"
VERL = "configs/published/verl-qwen2.5-math-7b-dapo-colocated.yaml"
VERL_ASYNC = "configs/published/verl-qwen2.5-math-7b-dapo-fully-async.yaml"

# NeMo-RL reports the mean generated sequence (prompt + response) per step; the prompt's share is
# not published: 150 tokens is assumed (an OpenMathInstruct-2 problem in the math prompt template).
NEMO_PROMPT = 150
# veRL's table publishes no lengths. The mean response is set so that the estimate's old_logprob span
# (a forward over every token: its time is the run's token count at the profile's rate) matches the
# published 107.71 s of the 32-GPU colocated row; every other veRL number is then a prediction.
VERL_PROMPT = 150
VERL_LENGTH_FROM = (VERL, 32, "old_logprob", 107.71)


def ranges(trainer, generator):
    return ["--set", "placement.ranges={policy: [0, %d], policy.rollout: [%d, %d]}" % (trainer - 1, trainer,
                                                                                        trainer + generator - 1)]


# name, config, world, extra args, mean sequence (prompt + response), published s, source, fit?
ROWS = [
    ("NeMo-RL v0.5 Llama-3.1-8B on-policy, 16 H100", NEMO, 16, [], 1019, 92.8, "h100-sxm", True),
    ("NeMo-RL v0.5 Llama-3.1-8B 1-step off, 16 H100", NEMO_1OFF, 16, [], 1123, 64.8, "h100-sxm", True),
    ("NeMo-RL v0.4 Llama-3.1-8B on-policy, 16 H100", NEMO, 16, [], 1060, 97.7, "h100-sxm", False),
    ("NeMo-RL v0.4 Llama-3.1-8B 1-step off, 16 H100", NEMO_1OFF, 16, [], 1129, 74.6, "h100-sxm", False),
    ("veRL DAPO Qwen2.5-Math-7B colocated, 32 H20", VERL, 32, [], None, 790.10, "h20", False),
    ("veRL DAPO Qwen2.5-Math-7B colocated, 64 H20", VERL, 64, [], None, 365.28, "h20", False),
    ("veRL DAPO Qwen2.5-Math-7B colocated, 128 H20", VERL, 128, [], None, 356.30, "h20", False),
    ("veRL DAPO Qwen2.5-Math-7B fully async, 16:16 H20", VERL_ASYNC, 32, ranges(16, 16), None, 294.77, "h20", False),
    ("veRL DAPO Qwen2.5-Math-7B fully async, 32:32 H20", VERL_ASYNC, 64, ranges(32, 32), None, 189.26, "h20", False),
    ("veRL DAPO Qwen2.5-Math-7B fully async, 64:64 H20", VERL_ASYNC, 128, ranges(64, 64), None, 150.63, "h20", False),
]


def plan(hpcrl, config, world, extra, prompt, response, profile):
    cmd = [hpcrl, "plan", config, "--world", str(world), "--gpus-per-node", "8", "--estimate", "--hardware", profile,
           "--prompt-len", str(prompt), "--response-len", str(response), "--decode-graphs", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["estimate"]["stages"][0]


def span_seconds(stage, name):
    return sum(s["seconds"] for s in stage["spans"] if s["name"] == name)


def verl_response(hpcrl, profile):
    """The mean response at which the estimate's span matches the published one (bisection)."""
    config, world, span, published = VERL_LENGTH_FROM
    lo, hi = 16, 28000
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if span_seconds(plan(hpcrl, config, world, [], VERL_PROMPT, mid, profile), span) < published:
            lo = mid
        else:
            hi = mid
    return lo


def estimate(hpcrl, config, world, extra, seq, profile, response=None):
    prompt = NEMO_PROMPT if seq is not None else VERL_PROMPT
    response = seq - NEMO_PROMPT if seq is not None else response
    stage = plan(hpcrl, config, world, extra, prompt, response, profile)
    return stage["seconds"], stage, prompt, response


def with_efficiency(profile_path, eff, out_path, name):
    text = open(profile_path).read()
    text = re.sub(r"(compute: \{peak_flops: [^,]+, efficiency: )[0-9.eE+-]+", lambda m: m.group(1) + f"{eff:.4g}",
                  text, count=1)
    text = re.sub(r"^name: .*$", f"name: {name}", text, count=1, flags=re.M)
    open(out_path, "w").write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hpcrl", required=True)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--profiles", default=tempfile.mkdtemp())
    a = ap.parse_args()
    os.makedirs(a.profiles, exist_ok=True)
    profiles = {p: f"profiles/{p}.yaml" for p in ("h100-sxm", "h20")}
    fitted = dict(profiles)
    if a.fit:
        fit_rows = [r for r in ROWS if r[7]]
        lo, hi = 0.05, 1.0
        for _ in range(30):  # the estimate falls as the efficiency rises
            mid = math.sqrt(lo * hi)
            path = os.path.join(a.profiles, "h100-sxm-fitted.yaml")
            with_efficiency(profiles["h100-sxm"], mid, path, "h100-sxm-fitted")
            logs = [math.log(estimate(a.hpcrl, c, w, x, s, path)[0] / pub) for _, c, w, x, s, pub, _, _ in fit_rows]
            lo, hi = (mid, hi) if sum(logs) > 0 else (lo, mid)
        eff = math.sqrt(lo * hi)
        print(f"fitted h100-sxm compute efficiency: {eff:.3f} (on {', '.join(r[0] for r in fit_rows)})\n")
        for p in profiles:  # the same share of the datasheet peak on both Hopper parts
            path = os.path.join(a.profiles, f"{p}-fitted.yaml")
            with_efficiency(profiles[p], eff, path, f"{p}-fitted")
            fitted[p] = path
    verl = verl_response(a.hpcrl, fitted["h20"])
    print(f"veRL mean response: {verl} tokens (the estimate's {VERL_LENGTH_FROM[2]} on the {VERL_LENGTH_FROM[1]}-GPU "
          f"colocated row at the published {VERL_LENGTH_FROM[3]} s)\n")
    print("| run | published s/step | lengths (prompt + response) | estimate s | ratio | G / A / T / sync s | fit? |")
    print("|---|--:|---|--:|--:|---|---|")
    for name, config, world, extra, seq, pub, profile, fit in ROWS:
        sec, st, prompt, response = estimate(a.hpcrl, config, world, extra, seq, fitted[profile], verl)
        parts = f"{st['generation_s']:.1f} / {st['aux_s']:.1f} / {st['train_s']:.1f} / {st['weight_sync_s']:.1f}"
        role = "fit" if fit and a.fit else "held out"
        print(f"| {name} | {pub} | {prompt} + {response} | {sec:.1f} | {sec / pub:.2f} | {parts} | {role} |")
    # veRL's colocated rows publish each phase: gen, old_log_prob, update_actor.
    print("\n| veRL colocated | gen published / estimate s | old_log_prob published / estimate s | "
          "update_actor published / estimate s |")
    print("|---|--:|--:|--:|")
    for world, (gen, old, update) in VERL_PHASES.items():
        st = plan(a.hpcrl, VERL, world, [], VERL_PROMPT, verl, fitted["h20"])
        g = span_seconds(st, "rollout/prefill") + span_seconds(st, "rollout/decode")
        o = span_seconds(st, "old_logprob")
        u = sum(x["seconds"] for x in st["spans"] if x["name"].startswith("actor_update/"))
        print(f"| {world} H20 | {gen} / {g:.1f} | {old} / {o:.1f} | {update} / {u:.1f} |")
    return 0


VERL_PHASES = {32: (357.41, 107.71, 313.81), 64: (150.72, 70.26, 133.41), 128: (177.85, 53.92, 113.81)}


if __name__ == "__main__":
    sys.exit(main())
