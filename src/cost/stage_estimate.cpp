// Per-stage estimates from the roles' layouts (stage_estimate.h).
#include "hpcrl/cost/stage_estimate.h"

#include <algorithm>

#include "hpcrl/config/layout.h"
#include "hpcrl/config/old_logprobs.h"
#include "hpcrl/cost/comm_cost.h"
#include "hpcrl/cost/work_depth.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/overloaded.h"

namespace hpcrl::cost {

namespace {
using config::ModelConfig;
using config::PipelineConfig;

// Prompts are this long when neither the command line nor a run says otherwise.
constexpr double kDefaultPrompt = 64, kDefaultSequence = 256;

struct RoleOnRanks {
  const ModelConfig* model = nullptr;
  Layout layout;
  int64_t first = 0;
};

RoleOnRanks role_on_ranks(const PipelineConfig& cfg, const std::string& name, bool generation, int64_t world) {
  RoleOnRanks r;
  r.model = cfg.find_model(name);
  if (!r.model) throw InputError("the cost model needs role '" + name + "', which the pipeline does not define");
  const config::ParallelConfig& p = generation ? r.model->rollout.parallel : r.model->parallel;
  const config::RankSpan span = config::ranks_of(cfg, generation ? name + ".rollout" : name, world);
  r.layout = {p.tp, p.sp, generation ? 1 : p.pp, p.ep, std::max<int64_t>(span.count, 1)};
  r.first = span.first;
  return r;
}

bool same_ranks(const RoleOnRanks& a, const RoleOnRanks& b) {
  return a.first == b.first && a.layout.ranks == b.layout.ranks;
}

// The context the RL stage's shapes resolve to.
struct RlShapes {
  int64_t prompt = 0, response = 0, max_response = 0;
  int64_t row = 0;  // tokens per row of the log-prob and training batches
  EngineMode engine;  // Shapes::engine
  Shapes::ToolUse tools;  // resolved: all zero for a stage without tools
};

RlShapes rl_shapes(const config::RlStage& s, const Shapes& given) {
  RlShapes r;
  const double max_new = double(s.sampling.max_new_tokens);
  r.prompt = int64_t(given.prompt > 0 ? given.prompt : kDefaultPrompt);
  r.response = int64_t(std::min(given.response > 0 ? given.response : max_new, max_new));
  r.max_response = int64_t(std::max(double(r.response), given.max_response > 0 ? given.max_response : max_new));
  // Rows are right-padded to the batch's longest response (prompts differ little); packing removes the padding.
  r.row = r.prompt + (s.train.packing ? r.response : r.max_response);
  r.engine = given.engine;
  r.engine.partial_rollouts = r.engine.partial_rollouts || s.async.partial_rollouts;  // the stage runs them
  if (s.tools.enabled()) {
    r.tools.calls = given.tools.calls > 0 ? given.tools.calls : double(s.tools.max_turns);
    r.tools.seconds = given.tools.seconds;
    r.tools.reply_tokens = given.tools.reply_tokens > 0 ? given.tools.reply_tokens : double(s.tools.reply_tokens);
  }
  return r;
}

SpanEstimate span(std::string name, const RoleOnRanks& role, std::string part, const PhaseCost& c) {
  return {std::move(name), role.model->name, role.first, role.layout.ranks, std::move(part), c};
}

// A training phase with its gradient syncs and optimizer steps.
// `batch.checkpointing` is the role's own; `steps` optimizer steps share the batch.
void add_training(StageEstimate& e, const std::string& name, const RoleOnRanks& r, const HardwareProfile& hw,
                  TrainingBatch batch, int64_t steps, int bytes) {
  const ModelArch& a = *r.model->arch;
  const bool checkpointing = batch.checkpointing = r.model->activation_checkpointing;
  const int64_t sequences = batch.sequences, micro = batch.micro;
  PhaseCost fb = training_pass(a, r.layout, hw, batch, bytes);
  // The backward of a step's last micro-batch, which the gradient all-reduce runs behind: two of a
  // micro-batch's three passes (three of four with the recomputed forward).
  const int64_t micro_batches = micro_batch_count(sequences, r.layout, micro);
  const double last_backward_s =
      micro_batches > 0 ? fb.seconds() / double(micro_batches) * (checkpointing ? 3.0 / 4.0 : 2.0 / 3.0) : 0;
  const int zero = int(r.model->optim.zero);
  const int64_t micro_per_step = steps > 0 ? (micro_batches + steps - 1) / steps : 0;
  PhaseCost sync, opt;
  for (int64_t k = 0; k < steps; ++k) {
    sync += gradient_sync(a, r.layout, hw, bytes,
                          {last_backward_s, zero, micro_per_step, double(r.model->optim.bucket_bytes())});
    opt += optimizer_step(a, r.layout, hw, zero);
  }
  const std::string part = e.unit == "step" ? "step" : "T";
  e.spans.push_back(span(name + "/forward_backward", r, part, fb));
  e.spans.push_back(span(name + "/grad_sync", r, part, sync));
  e.spans.push_back(span(name + "/optimizer", r, part, opt));
}

// Weight bytes from the trainer to a generation copy (over a bridge to another node, or resharded in place).
PhaseCost weight_sync(const RoleOnRanks& trainer, const RoleOnRanks& gen, const HardwareProfile& hw, int bytes) {
  PhaseCost c;
  const double w = weight_bytes(*trainer.model->arch, bytes);
  const bool apart = !same_ranks(trainer, gen);
  const int64_t lo = std::min(trainer.first, gen.first);
  const int64_t hi = std::max(trainer.first + trainer.layout.ranks, gen.first + gen.layout.ranks);
  const Link& link = hw.link(crosses_nodes(hi - lo, 1, hw.gpus_per_node));
  c.comm_s = apart ? broadcast_seconds(w, gen.layout.ranks + 1, link)
                   : all_gather_seconds(w, trainer.layout.model_ranks(), link);
  c.comm_bytes = apart || trainer.layout.model_ranks() > 1 ? w : 0;  // an unsplit trainer reshards locally
  return c;
}

double sum_part(const StageEstimate& e, const std::string& part, const std::string& role = "") {
  double s = 0;
  for (const auto& sp : e.spans)
    if (sp.part == part && (role.empty() || sp.role == role)) s += sp.cost.seconds();
  return s;
}
}  // namespace

namespace {
// G: the rollout and the rewards on the generating ranks.
void add_generation(StageEstimate& e, const PipelineConfig& cfg, const config::RlStage& s, const RoleOnRanks& gen,
                    int64_t world, const HardwareProfile& hw, const RlShapes& sh, int bytes) {
  const int64_t n = s.responses();
  RolloutShape shape;
  shape.sequences = n;
  shape.prompt = sh.prompt;
  shape.response = sh.response;
  shape.max_response = sh.max_response;
  shape.max_batch = gen.model->rollout.max_batch;
  shape.group = s.group;
  shape.tool_calls = sh.tools.calls, shape.tool_seconds = sh.tools.seconds, shape.reply_tokens = sh.tools.reply_tokens;
  const RolloutCost r = rollout(*gen.model->arch, gen.layout, hw, shape, bytes, sh.engine);
  e.tools = sh.tools;
  e.tool_wait_s = r.tool_wait_s;
  e.spans.push_back(span("rollout/prefill", gen, "G", r.prefill));
  e.spans.push_back(span("rollout/decode", gen, "G", r.decode));
  for (const auto& name : s.rewards) {
    const config::RewardConfig* rc = cfg.find_reward(name);
    if (!rc || rc->type != config::RewardType::model) continue;  // text rewards: host time, not modelled
    const RoleOnRanks rm = role_on_ranks(cfg, rc->model, false, world);
    e.spans.push_back(span("reward/" + name, rm, "G",
                           forward_pass(*rm.model->arch, rm.layout, hw, n, sh.row, s.train.micro_batch, bytes)));
  }
}

// A and T of a GRPO/PPO iteration on the trainer's, reference's and critic's ranks.
void add_training_side(StageEstimate& e, const PipelineConfig& cfg, const config::RlStage& s,
                       const RoleOnRanks& policy, const std::string& critic, int64_t world,
                       const HardwareProfile& hw, const RlShapes& sh, int bytes) {
  const int64_t n = s.responses(), len = sh.row, micro = s.train.micro_batch;
  // A pass only where the stage runs one: not with the engine's log-probs, nor when π_old is the update's forward.
  if (config::old_logprob_source(s) == config::OldLogprobs::kPass)
    e.spans.push_back(span("old_logprob", policy, "A",
                           forward_pass(*policy.model->arch, policy.layout, hw, n, len, micro, bytes)));
  if (!s.reference.empty()) {
    const RoleOnRanks ref = role_on_ranks(cfg, s.reference, false, world);
    e.spans.push_back(span("ref_logprob", ref, "A", forward_pass(*ref.model->arch, ref.layout, hw, n, len, micro, bytes)));
  }
  const int64_t steps = config::minibatches_per_epoch(s) * s.epochs;
  add_training(e, "actor_update", policy, hw, {n * s.epochs, len, micro, false, true}, steps, bytes);
  if (critic.empty()) return;
  const RoleOnRanks cr = role_on_ranks(cfg, critic, false, world);
  e.spans.push_back(span("critic_values", cr, "A", forward_pass(*cr.model->arch, cr.layout, hw, n, len, micro, bytes)));
  add_training(e, "critic_update", cr, hw, {n * s.epochs, len, micro, false, false}, steps, bytes);
}

// How G, A and T add up for the stage's placement.
void compose_rl(StageEstimate& e, const config::RlStage& s, const RoleOnRanks& policy, const RoleOnRanks& gen) {
  e.generation_s = sum_part(e, "G");
  e.sync_s = sum_part(e, "sync");
  // Roles on the same ranks take turns; roles on ranks of their own run side by side.
  std::map<std::pair<int64_t, int64_t>, double> aux_by_role, train_by_role;
  for (const auto& sp : e.spans) {
    if (sp.part == "A") aux_by_role[{sp.first_rank, sp.ranks}] += sp.cost.seconds();
    if (sp.part == "T") train_by_role[{sp.first_rank, sp.ranks}] += sp.cost.seconds();
  }
  const bool apart = !same_ranks(policy, gen);
  double aux_sum = 0, aux_max = 0, train_sum = 0, train_max = 0;
  for (const auto& [r, v] : aux_by_role) aux_sum += v, aux_max = std::max(aux_max, v);
  for (const auto& [r, v] : train_by_role) train_sum += v, train_max = std::max(train_max, v);
  if (!apart) {
    e.composition = "colocated: G + A + T (+ weight sync)";
    e.aux_s = aux_sum, e.train_s = train_sum;
    e.seconds = e.generation_s + aux_sum + train_sum + e.sync_s;
  } else if (s.async.max_staleness == 0) {
    e.composition = "disaggregated: G + max A + max T + weight sync";
    e.aux_s = aux_max, e.train_s = train_max;
    e.seconds = e.generation_s + aux_max + train_max + e.sync_s;
  } else {
    e.composition = "asynchronous: max(G, max A + max T) + weight sync";
    e.aux_s = aux_max, e.train_s = train_max;
    e.seconds = std::max(e.generation_s, aux_max + train_max) + e.sync_s;
  }
}

StageEstimate estimate_rl(const PipelineConfig& cfg, const config::RlStage& s, const std::string& critic,
                          int64_t world, const HardwareProfile& hw, const Shapes& shapes, int bytes) {
  StageEstimate e;
  e.unit = "iteration";
  e.steps = double(s.iterations);
  const RlShapes sh = rl_shapes(s, shapes);
  e.prompt = sh.prompt, e.response = sh.response, e.row = sh.row;
  const RoleOnRanks policy = role_on_ranks(cfg, s.policy, false, world);
  const RoleOnRanks gen = role_on_ranks(cfg, s.policy, true, world);
  add_generation(e, cfg, s, gen, world, hw, sh, bytes);
  add_training_side(e, cfg, s, policy, critic, world, hw, sh, bytes);
  const auto &t = policy.model->parallel, &g = policy.model->rollout.parallel;
  if (!same_ranks(policy, gen) || t.tp != g.tp || t.sp != g.sp || t.ep != g.ep || t.pp > 1)
    e.spans.push_back(span("weight_sync", policy, "sync", weight_sync(policy, gen, hw, bytes)));
  compose_rl(e, s, policy, gen);
  return e;
}

// A stage counted in steps of sequences (SFT, distillation).
StageEstimate per_step(int64_t steps, const Shapes& shapes) {
  StageEstimate e;
  e.unit = "step";
  e.steps = double(steps);
  e.sequence = int64_t(shapes.sequence > 0 ? shapes.sequence : kDefaultSequence);
  // Rows are right-padded to the batch's longest (unless the run measured it: as long as the mean).
  e.row = std::max(e.sequence, int64_t(shapes.max_sequence));
  return e;
}

StageEstimate estimate_sft(const PipelineConfig& cfg, const config::SftStage& s, int64_t world,
                           const HardwareProfile& hw, const Shapes& shapes, int bytes) {
  StageEstimate e = per_step(s.steps, shapes);
  const RoleOnRanks m = role_on_ranks(cfg, s.model, false, world);
  add_training(e, "train", m, hw, {s.batch, e.row, s.train.micro_batch, false, false}, 1, bytes);
  e.composition = "step: forward/backward + gradient sync + optimizer";
  e.train_s = e.seconds = sum_part(e, "step");
  return e;
}

StageEstimate estimate_distill(const PipelineConfig& cfg, const config::DistillStage& s, int64_t world,
                               const HardwareProfile& hw, const Shapes& shapes, int bytes) {
  StageEstimate e = per_step(s.steps, shapes);
  const RoleOnRanks student = role_on_ranks(cfg, s.student, false, world);
  const RoleOnRanks teacher = role_on_ranks(cfg, s.teacher, false, world);
  if (s.on_policy || s.sequence_level) {
    const RoleOnRanks& gen = s.sequence_level ? teacher : student;
    e.prompt = int64_t(shapes.prompt > 0 ? shapes.prompt : kDefaultPrompt);
    e.response = int64_t(shapes.response > 0 ? shapes.response : double(s.sampling.max_new_tokens));
    const int64_t longest = int64_t(shapes.max_response > 0 ? shapes.max_response : double(s.sampling.max_new_tokens));
    RolloutShape shape;
    shape.sequences = s.batch;
    shape.prompt = e.prompt;
    shape.response = e.response;
    shape.max_response = std::max(longest, e.response);
    shape.max_batch = gen.model->rollout.max_batch;
    const RolloutCost r = rollout(*gen.model->arch, gen.layout, hw, shape, bytes, shapes.engine);
    e.spans.push_back(span("rollout/prefill", gen, "step", r.prefill));
    e.spans.push_back(span("rollout/decode", gen, "step", r.decode));
    e.sequence = e.prompt + e.response;
    e.row = std::max(int64_t(shapes.max_sequence), e.prompt + std::max(longest, e.response));
  }
  if (!s.sequence_level)
    e.spans.push_back(span("teacher_forward", teacher, "step", forward_pass(*teacher.model->arch, teacher.layout, hw,
                                                                            s.batch, e.row, s.train.micro_batch, bytes)));
  add_training(e, "train", student, hw, {s.batch, e.row, s.train.micro_batch, false, false}, 1, bytes);
  e.composition = "step: (generation) + teacher forward + student forward/backward + sync + optimizer";
  e.train_s = e.seconds = sum_part(e, "step");
  return e;
}
}  // namespace

namespace {
// One evaluation of the stage: its prompts generated by the evaluated role's engine (the
// role's ranks, pp = 1 as the engine runs) at the token cap, in batches of 64 (algo/stages/evaluation.cpp).
void add_evaluation(StageEstimate& e, const PipelineConfig& cfg, const config::StageConfig& st, int64_t world,
                    const HardwareProfile& hw, const Shapes& sh, int bytes) {
  e.eval = eval_work(cfg, st);
  if (e.eval.prompts <= 0) return;
  RoleOnRanks r = role_on_ranks(cfg, e.eval.role, false, world);
  // Prompts are split over the role's dp ranks; each dp slot generates with one pp = 1 copy.
  r.layout.ranks = r.layout.dp() * r.layout.tp * r.layout.sp;
  r.layout.pp = 1;
  const int64_t prompt = int64_t(sh.prompt > 0 ? sh.prompt : kDefaultPrompt);
  RolloutShape shape;
  shape.sequences = e.eval.prompts * e.eval.samples_per_prompt;
  shape.prompt = prompt;
  shape.response = e.eval.max_new_tokens;
  shape.max_response = e.eval.max_new_tokens;
  shape.max_batch = 64;
  e.eval_cost = rollout(*r.model->arch, r.layout, hw, shape, bytes, sh.engine);
}
}  // namespace

std::vector<StageEstimate> estimate_pipeline(const PipelineConfig& cfg, int64_t world, const HardwareProfile& hw,
                                             const Shapes& shapes, const std::map<int, Shapes>& measured) {
  const int bytes = cfg.run.dtype == config::DType::bfloat16 ? 2 : 4;
  if (shapes.engine.decode_graphs && !(hw.graph_kernel_overhead_s > 0))
    throw InputError("--decode-graphs needs the hardware profile's graph_kernel_overhead_s (seconds per kernel "
                     "replayed from a CUDA graph), which " + hw.path + " does not give; add it to the profile");
  std::vector<StageEstimate> out;
  for (size_t i = 0; i < cfg.stages.size(); ++i) {
    const config::StageConfig& st = cfg.stages[i];
    const std::string name = config::to_string(st.kind());
    Shapes sh = shapes;
    if (auto it = measured.find(int(i)); it != measured.end()) {  // the command line still wins where given
      if (sh.prompt <= 0) sh.prompt = it->second.prompt;
      if (sh.response <= 0) sh.response = it->second.response;
      if (sh.sequence <= 0) sh.sequence = it->second.sequence;
      if (sh.max_response <= 0) sh.max_response = it->second.max_response;
      if (sh.max_sequence <= 0) sh.max_sequence = it->second.max_sequence;
      if (sh.tools.calls <= 0) sh.tools.calls = it->second.tools.calls;
      if (sh.tools.seconds <= 0) sh.tools.seconds = it->second.tools.seconds;
      if (sh.tools.reply_tokens <= 0) sh.tools.reply_tokens = it->second.tools.reply_tokens;
    }
    StageEstimate e = std::visit(
        util::overloaded{
            [&](const config::SftStage& s) { return estimate_sft(cfg, s, world, hw, sh, bytes); },
            [&](const config::GrpoStage& s) { return estimate_rl(cfg, s, "", world, hw, sh, bytes); },
            [&](const config::PpoStage& s) { return estimate_rl(cfg, s, s.critic, world, hw, sh, bytes); },
            [&](const config::DistillStage& s) { return estimate_distill(cfg, s, world, hw, sh, bytes); }},
        st.body);
    e.stage = name;
    e.engine = sh.engine;
    if (const config::RlStage* rl = st.rl()) e.engine.partial_rollouts = e.engine.partial_rollouts || rl->async.partial_rollouts;
    add_evaluation(e, cfg, st, world, hw, sh, bytes);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hpcrl::cost
