#!/usr/bin/env python3
"""The cost model beside published GRPO/DAPO step times (docs/estimates.md, "Published runs").

    published_runs.py --hpcrl BIN [--fit] [--profiles DIR]

Each row: a published run (source and numbers in its configs/published/*.yaml header and in
docs/estimates.md), the hpcrl pipeline that describes it, the lengths it ran with, and the
published seconds per step. `hpcrl plan --estimate --json` predicts the step on the shipped
GPU profile. With --fit, the profile's compute and memory efficiencies are first set so that the
rows marked "fit" come out nearest their published times (least squares of the log ratios), the
fitted profile is written to DIR/<profile>-fitted.yaml, and every row is estimated with it; the
others are held out. Prints Markdown tables: the runs; veRL's published phases beside the estimate's;
each veRL colocated phase split into seconds that shrink with the GPU count and seconds that do not (fitted
on 32 and 128 GPUs, 64 held out); and veRL's fully asynchronous rows with each run's mean response set
from its own update_actor (veRL publishes no lengths, and these runs' differ from the colocated ones').
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
    # veRL's fully asynchronous rows also pause responses at a weight sync and finish them later (partial_rollout).
    return ["--set", "placement.ranges={policy: [0, %d], policy.rollout: [%d, %d]}" % (trainer - 1, trainer,
                                                                                        trainer + generator - 1),
            "--partial-rollouts"]


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


def update_seconds(stage):
    return sum(x["seconds"] for x in stage["spans"] if x["name"].startswith("actor_update/"))


def response_matching(hpcrl, config, world, extra, profile, seconds_of, published):
    """The mean response at which seconds_of(the estimate's stage) equals the published seconds (bisection)."""
    lo, hi = 16, 28000
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if seconds_of(plan(hpcrl, config, world, extra, VERL_PROMPT, mid, profile)) < published:
            lo = mid
        else:
            hi = mid
    return lo


def verl_response(hpcrl, profile):
    config, world, span, published = VERL_LENGTH_FROM
    return response_matching(hpcrl, config, world, [], profile, lambda st: span_seconds(st, span), published)


def phase_scaling():
    """Each published veRL colocated phase as a + b/N: fitted on 32 and 128 GPUs, the 64-GPU row held out."""
    print("\n| veRL colocated phase | a: s that do not shrink with N | b: GPU·s | 64 GPUs: a + b/64 | published |")
    print("|---|--:|--:|--:|--:|")
    for i, name in enumerate(("gen", "old_log_prob", "update_actor")):
        t32, t64, t128 = (VERL_PHASES[n][i] for n in (32, 64, 128))
        b = (t32 - t128) / (1 / 32 - 1 / 128)
        a = t32 - b / 32
        print(f"| {name} | {a:.1f} | {b:.0f} | {a + b / 64:.1f} | {t64} |")


def async_rows_at_their_own_length(hpcrl, profile):
    """veRL's fully asynchronous rows with each run's mean response set from its own update_actor."""
    print("\n| veRL fully async | response set from update_actor | gen wait published | G estimate s | "
          "step published | estimate | ratio |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name, config, world, extra, _, pub, prof, _ in ROWS:
        if config != VERL_ASYNC:
            continue
        gen_wait, update = VERL_ASYNC_PHASES[world]
        resp = response_matching(hpcrl, config, world, extra, profile, update_seconds, update)
        st = plan(hpcrl, config, world, extra, VERL_PROMPT, resp, profile)
        print(f"| {name.split(', ')[-1]} | {resp} | {gen_wait} | {st['generation_s']:.1f} | {pub} | "
              f"{st['seconds']:.1f} | {st['seconds'] / pub:.2f} |")


def estimate(hpcrl, config, world, extra, seq, profile, response=None):
    prompt = NEMO_PROMPT if seq is not None else VERL_PROMPT
    response = seq - NEMO_PROMPT if seq is not None else response
    stage = plan(hpcrl, config, world, extra, prompt, response, profile)
    return stage["seconds"], stage, prompt, response


def with_efficiencies(profile_path, compute, memory, out_path, name):
    text = open(profile_path).read()
    text = re.sub(r"(compute: \{peak_flops: [^,]+, efficiency: )[0-9.eE+-]+", lambda m: m.group(1) + f"{compute:.4g}",
                  text, count=1)
    text = re.sub(r"(memory: \{bandwidth: [^,]+, efficiency: )[0-9.eE+-]+", lambda m: m.group(1) + f"{memory:.4g}",
                  text, count=1)
    text = re.sub(r"^name: .*$", f"name: {name}", text, count=1, flags=re.M)
    open(out_path, "w").write(text)


def fit_efficiencies(hpcrl, profile, rows, out_dir):
    """The compute and memory efficiencies (each in [0.2, 0.95], the shares of the datasheet peaks) that minimise
    the sum of the rows' squared log ratios: a 7 x 7 grid, then four rounds of a 5 x 5 grid around the best point
    at half the spacing. Compute-bound work (training, prefill) moves with the first, bandwidth-bound decode with
    the second, so two rows that weigh them differently can pin both."""
    path = os.path.join(out_dir, "fit-trial.yaml")

    def loss(c, m):
        with_efficiencies(profile, c, m, path, "fit-trial")
        return sum(math.log(estimate(hpcrl, cfg, w, x, s, path)[0] / pub) ** 2 for _, cfg, w, x, s, pub, _, _ in rows)

    lo, hi = math.log(0.2), math.log(0.95)
    step = (hi - lo) / 6
    grid = [lo + i * step for i in range(7)]
    best = min((loss(math.exp(c), math.exp(m)), c, m) for c in grid for m in grid)
    for _ in range(4):
        step /= 2
        around = [best[1:]] + [(c, m) for c in (best[1] + i * step for i in range(-2, 3))
                               for m in (best[2] + j * step for j in range(-2, 3))]
        best = min((loss(math.exp(c), math.exp(m)), c, m) for c, m in around if lo <= c <= hi and lo <= m <= hi)
    return math.exp(best[1]), math.exp(best[2])


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
        compute, memory = fit_efficiencies(a.hpcrl, profiles["h100-sxm"], fit_rows, a.profiles)
        print(f"fitted h100-sxm efficiencies: compute {compute:.3f}, memory {memory:.3f} "
              f"(on {', '.join(r[0] for r in fit_rows)})\n")
        for p in profiles:  # the same shares of the datasheet peaks on both Hopper parts
            path = os.path.join(a.profiles, f"{p}-fitted.yaml")
            with_efficiencies(profiles[p], compute, memory, path, f"{p}-fitted")
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
        u = update_seconds(st)
        print(f"| {world} H20 | {gen} / {g:.1f} | {old} / {o:.1f} | {update} / {u:.1f} |")
    print("\n| veRL fully async | gen (trainer's wait) published / G estimate s | update_actor published / estimate s |")
    print("|---|--:|--:|")
    for world, (gen_wait, update) in VERL_ASYNC_PHASES.items():
        extra = ranges(world // 2, world // 2)
        st = plan(a.hpcrl, VERL_ASYNC, world, extra, VERL_PROMPT, verl, fitted["h20"])
        print(f"| {world // 2}:{world // 2} H20 | {gen_wait} / {st['generation_s']:.1f} | "
              f"{update} / {update_seconds(st):.1f} |")
    phase_scaling()
    async_rows_at_their_own_length(a.hpcrl, fitted["h20"])
    return 0


VERL_PHASES = {32: (357.41, 107.71, 313.81), 64: (150.72, 70.26, 133.41), 128: (177.85, 53.92, 113.81)}
# The fully asynchronous rows by world (trainer:rollouter half each): the trainer's wait for samples ("gen") and
# update_actor; no old_log_prob (the rollout's log-probs are used).
VERL_ASYNC_PHASES = {32: (21.26, 269.80), 64: (28.46, 156.98), 128: (33.14, 113.16)}


if __name__ == "__main__":
    sys.exit(main())
