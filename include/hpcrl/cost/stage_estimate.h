// `hpcrl plan --estimate`: predicted seconds per step (SFT, distillation) or
// iteration (GRPO, PPO) of every stage of a pipeline, span by span and role by
// role, from the work–depth model (work_depth.h, phase_cost.h), the roles'
// layouts on their placement ranges and a hardware profile; composed per
// placement (docs/placement.md, docs/estimates.md):
//   colocated            G + A + T
//   disaggregated        G + max A + max T     (A on the roles' own ranks run side by side)
//   asynchronous (k ≥ 1) max(G, A + T)          (hpcrl scores beside generation, so the reward is
//                                                in G, and the trainer computes old/reference log-probs)
// plus the weight sync to a generation copy. G = rollout + reward, A = old /
// reference log-probs and critic values, T = the actor's (and critic's) update.
// Sequence lengths are assumptions (Shapes), printed with the estimate.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/cost/eval_work.h"
#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/cost/phase_cost.h"

namespace hpcrl::cost {

// What the estimate assumes beyond the config: token lengths (mean per
// sequence), and how the generation engine launches a decode step.
struct Shapes {
  double prompt = 0;     // RL prompts (and distillation prompts when generating)
  double response = 0;   // RL responses (mean); 0 = the stage's max_new_tokens
  double max_response = 0;  // the longest response of a batch (its padded length); 0 = max_new_tokens
  double sequence = 0;   // SFT / distillation sequence (prompt + answer)
  double max_sequence = 0;  // SFT / distillation: the longest row of a batch (rows are padded to it); 0 = the mean
  std::string source;    // where they come from, for the printout
  // A stage with tools (docs/tools.md): calls per response (0: its tools.max_turns, the most it may make),
  // seconds per call (0: none, as for the calculator), tokens per reply (0: its tools.reply_tokens, the cap).
  struct ToolUse {
    double calls = 0, seconds = 0, reply_tokens = 0;
  } tools;
  // How another serving engine (a published run's) generates: decode steps replayed as CUDA graphs, as
  // vLLM and SGLang do by default; responses paused at a weight sync (veRL's fully asynchronous trainer).
  // hpcrl's engine launches every op and finishes every response in its iteration (both false).
  EngineMode engine;
};

struct SpanEstimate {
  std::string name;    // "rollout/decode", "actor_update", ...
  std::string role;    // the role whose ranks run it
  int64_t first_rank = 0, ranks = 1;  // those ranks (roles sharing a range exactly run one after another)
  std::string part;    // "G" | "A" | "T" | "sync" | "step"
  PhaseCost cost;
};

struct StageEstimate {
  std::string stage;            // "grpo"
  std::string unit;             // "iteration" | "step"
  std::string composition;      // the formula used
  std::vector<SpanEstimate> spans;
  double generation_s = 0, aux_s = 0, train_s = 0, sync_s = 0;  // G, max A, max T, weight sync
  double seconds = 0;           // per step / iteration
  double steps = 0;             // steps / iterations the stage runs
  int64_t prompt = 0, response = 0, sequence = 0;  // the lengths used (means)
  int64_t row = 0;              // tokens per training row (padded to the batch's longest unless packed)
  EngineMode engine;            // the engine the rollout was costed for (Shapes)
  // A stage with tools: what its rollout was costed with (Shapes::tools resolved), and the decode time the
  // calls added (RolloutCost::tool_wait_s).
  Shapes::ToolUse tools;
  double tool_wait_s = 0;
  // The stage's held-out evaluations (outside `seconds`): what they decode, and one
  // evaluation's prefill and decode with every response at the token cap (an upper bound).
  EvalWork eval;
  RolloutCost eval_cost;
  double eval_seconds() const { return eval_cost.prefill.seconds() + eval_cost.decode.seconds(); }
};

// Lengths a run measured (by stage index) fill in what `shapes` leaves at 0.
std::vector<StageEstimate> estimate_pipeline(const config::PipelineConfig& cfg, int64_t world,
                                             const HardwareProfile& hw, const Shapes& shapes,
                                             const std::map<int, Shapes>& measured = {});

// Mean lengths a finished run measured, per stage index, from RUN_DIR/metrics.jsonl:
// RL stages' response_len/mean and /max and prompt tokens (tokens_per_s · seconds per
// sequence, less the response); SFT and distillation's seq_len/mean and /max (tokens per
// row and the batch's longest row); with tools, tools/calls, seconds/tool_call and
// tools/reply_tokens per call.
std::map<int, Shapes> measured_shapes(const std::string& run_dir, const config::PipelineConfig& cfg);

std::string estimate_text(const std::vector<StageEstimate>& e, const HardwareProfile& hw);
nlohmann::json estimate_json(const std::vector<StageEstimate>& e, const HardwareProfile& hw);

}  // namespace hpcrl::cost
