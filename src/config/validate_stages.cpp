// Validation of the stage list against the rest of the file: every role,
// dataset and reward a stage names exists; roles are used as what they are
// (a frozen role is never trained, a critic has a value head, a reference is
// not the policy itself, teacher and student share a vocabulary); global
// batches split over the data-parallel ranks; and the order makes sense
// (warnings when a read-only role still has random weights when first used,
// or when something defined is never used); a command reward's program can be
// found (a warning in validate, an error in run: the job may run elsewhere).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "config/passes.h"
#include "config/schema.h"
#include "hpcrl/config/layout.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::config {

namespace {

// The program a command reward starts, when the config says it plainly: argv[0]
// of the list form, or the first word of a `sh -c` line that starts with a
// program (not a shell builtin, an assignment or other syntax); "" otherwise.
std::string reward_program(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  if (!(argv.size() == 3 && argv[0] == "sh" && argv[1] == "-c")) return argv[0];
  const std::string& line = argv[2];
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  std::string word = line.substr(b, line.find_first_of(" \t\n;&|", b) - b);
  for (char ch : word)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && std::string("_./+-").find(ch) == std::string::npos) return "";
  // Shell keywords and builtins (POSIX plus the common bash ones): sh runs them, PATH has none of them.
  static const std::set<std::string> builtins{
      ".", ":", "alias", "bg", "break", "case", "cd", "command", "continue", "echo", "eval", "exec", "exit",
      "export", "false", "fc", "fg", "for", "getopts", "hash", "if", "jobs", "kill", "local", "printf", "pwd",
      "read", "readonly", "return", "set", "shift", "source", "test", "time", "times", "trap", "true", "type",
      "ulimit", "umask", "unalias", "unset", "until", "wait", "while", "{", "(", "!"};
  return builtins.count(word) ? "" : word;
}

bool executable_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// Found the way posix_spawnp looks: as given when it has a '/', else along PATH.
bool program_found(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return executable_file(prog);
  const char* path = std::getenv("PATH");
  for (const auto& dir : str::split(path ? path : "/bin:/usr/bin", ':'))
    if (executable_file((dir.empty() ? std::string(".") : dir) + "/" + prog)) return true;
  return false;
}

struct StageChecker {
  const PipelineConfig& c;
  const ValidateOptions& opt;
  Diagnostics& diag;
  std::vector<std::string> roles, datasets, rewards;

  // The role named at `path`, or null after reporting that it does not exist.
  const ModelConfig* role(const std::string& name, const std::string& path) {
    if (name.empty()) return nullptr;  // missing: already reported by the schema
    if (const ModelConfig* m = c.find_model(name)) return m;
    diag.error(c.pos(path), path, "no model role '" + name + "'", name_fix(name, roles, "models"));
    return nullptr;
  }

  void trained(const ModelConfig* m, const std::string& path, Head head) {
    if (!m) return;
    if (m->frozen)
      diag.error(c.pos(path), path, "this stage trains '" + m->name + "', which is frozen",
                 "train another role, or remove `frozen: true` from models." + m->name);
    expect_head(m, path, head);
  }

  void expect_head(const ModelConfig* m, const std::string& path, Head head) {
    if (!m || m->head == head) return;
    std::string why = head == Head::value ? "it must score states/responses (head: value)"
                                          : "it must produce token log-probabilities (head: lm)";
    diag.error(c.pos(path), path, "role '" + m->name + "' has head: " + to_string(m->head) + ", but " + why,
               "use a role with head: " + to_string(head) + " (e.g. `init: {from: " + m->name + "}, head: " +
                   to_string(head) + "`)");
  }

  void same_vocab(const ModelConfig* a, const ModelConfig* b, const std::string& path, const std::string& why) {
    if (!a || !b || !a->arch || !b->arch || a->arch->vocab_size == b->arch->vocab_size) return;
    diag.error(c.pos(path), path,
               "'" + b->name + "' has vocabulary " + std::to_string(b->arch->vocab_size) + " but '" + a->name +
                   "' has " + std::to_string(a->arch->vocab_size) + "; " + why,
               "use roles with the same tokenizer and vocabulary");
  }

  void data(const std::string& name, const std::string& path) {
    if (name.empty() || c.find_data(name)) return;
    diag.error(c.pos(path), path, "no dataset '" + name + "'", name_fix(name, datasets, "data"));
  }

  // Global sequences per optimizer step must split evenly over the role's dp ranks.
  void batch_split(const ModelConfig* m, int64_t batch, const std::string& path, const std::string& what) {
    if (!m || opt.world <= 0) return;
    int64_t ranks = ranks_of(c, m->name, opt.world).count;
    int64_t dp = data_parallel_degree(m->parallel, ranks);
    if (dp > 0 && batch % dp != 0)
      diag.error(c.pos(path), path,
                 what + " " + std::to_string(batch) + " does not split over the " + std::to_string(dp) +
                     " data-parallel ranks of '" + m->name + "' (dp = " + std::to_string(ranks) + " ranks / (tp·sp·pp))",
                 "use a multiple of " + std::to_string(dp));
  }

  // stop_at_accuracy is checked at periodic evaluations on the stage data's held-out split.
  void early_stop(double target, int64_t eval_every, const std::string& data_name, const std::string& p) {
    if (target <= 0) return;
    const std::string path = p + ".stop_at_accuracy";
    if (eval_every <= 0)
      diag.error(c.pos(path), path,
                 "stop_at_accuracy " + schema::format_number(target) + " is checked at periodic evaluations, but this stage has none",
                 "set eval_every on the stage (or run.eval_every), e.g. eval_every: 10");
    const DatasetConfig* d = c.find_data(data_name);
    if (!d) return;
    bool held_out = d->kind == DataKind::synthetic ? d->synthetic.eval > 0
                                                  : !d->jsonl.eval_path.empty() || d->jsonl.eval_holdout > 0;
    if (!held_out)
      diag.error(c.pos(path), path, "dataset '" + data_name + "' has no held-out split to measure accuracy on",
                 d->kind == DataKind::synthetic ? "give data." + data_name + ".synthetic.eval > 0"
                                                : "give data." + data_name + ".jsonl.eval_path or eval_holdout");
  }

  void rl(const RlStage& s, const std::string& p, const ModelConfig* policy) {
    trained(policy, p + ".policy", Head::lm);
    if (!s.reference.empty()) {
      const ModelConfig* ref = role(s.reference, p + ".reference");
      expect_head(ref, p + ".reference", Head::lm);
      if (ref && ref == policy)
        diag.error(c.pos(p + ".reference"), p + ".reference", "the reference is the policy itself, so KL is always 0",
                   "add a reference role, e.g. `reference: {init: {from: " + policy->name + "}, frozen: true}`");
      same_vocab(policy, ref, p + ".reference", "KL compares their token distributions");
    }
    for (const auto& r : s.rewards)
      if (!c.find_reward(r)) diag.error(c.pos(p + ".reward"), p + ".reward", "no reward '" + r + "'", name_fix(r, rewards, "rewards"));
    data(s.data, p + ".data");
    int64_t per_step = s.mini_batch > 0 ? s.mini_batch : s.responses();
    batch_split(policy, per_step, p + (s.mini_batch > 0 ? ".mini_batch" : ".prompts"), "a step's sequences");
    early_stop(s.stop_at_accuracy, s.eval_every, s.data, p);
  }

  // Where a GRPO/PPO stage's roles may run (docs/placement.md): generation on
  // its own ranks (`<policy>.rollout`) beside the trainer, the reference and
  // critic sharing the trainer's ranks exactly or on ranks of their own, a
  // model reward on the generation's ranks exactly or on ranks of its own.
  void rl_placement(const RlStage& s, const std::string& p, const ModelConfig* policy, const std::string& critic) {
    if (policy && generation_placement(s, p, *policy)) trainer_placement(s, p, *policy, critic);
  }

  // Whether generation has ranks of its own (then the trainer's are checked too).
  bool generation_placement(const RlStage& s, const std::string& p, const ModelConfig& policy) {
    const bool disaggregated = c.placement.mode == PlacementMode::disaggregated;
    const RankSpan train = ranks_of(c, policy.name, opt.world);
    const RankSpan gen = ranks_of(c, policy.name + ".rollout", opt.world);
    const bool own_gen = disaggregated && gen.count > 0 && (gen.first != train.first || gen.count != train.count);
    const std::string rp = "models." + policy.name + ".rollout.parallel";
    if (s.async.max_staleness > 0 && !own_gen)
      diag.error(c.pos(p + ".async.max_staleness"), p + ".async.max_staleness",
                 "asynchronous RL overlaps generation with training, so generation needs ranks of its own",
                 "set placement.mode: disaggregated with a `" + policy.name + ".rollout` range beside `" +
                     policy.name + "`'s, or use max_staleness: 0");
    if (s.async.partial_rollouts && s.async.max_staleness < 2)
      diag.error(c.pos(p + ".async.partial_rollouts"), p + ".async.partial_rollouts",
                 "partial rollouts generate one version ahead of training and continue a response across an "
                 "update, so its oldest token is at least 2 versions old when trained; max_staleness is " +
                     std::to_string(s.async.max_staleness),
                 "set async.max_staleness: 2 (or more: each more lets a response cross one more update) with "
                 "generation on ranks of its own, or remove partial_rollouts");
    if (s.async.keep_stale_cache && !s.async.partial_rollouts)
      diag.error(c.pos(p + ".async.keep_stale_cache"), p + ".async.keep_stale_cache",
                 "keep_stale_cache decides what a response paused at a weight update continues with, and only "
                 "partial rollouts pause responses",
                 "set async.partial_rollouts: true beside it, or remove keep_stale_cache");
    const bool other_layout = policy.rollout.parallel.tp != policy.parallel.tp ||
                              policy.rollout.parallel.sp != policy.parallel.sp ||
                              policy.rollout.parallel.ep != policy.parallel.ep;
    if (policy.rollout.parallel.pp != 1)
      diag.error(c.pos(rp), rp + ".pp",
                 "generation runs a whole model per replica (pp = 1), not pp = " +
                     std::to_string(policy.rollout.parallel.pp),
                 "remove models." + policy.name + ".rollout.parallel.pp (split the generation copy with tp instead)");
    if (!own_gen) {
      if (disaggregated && opt.world > 0 && train.count != opt.world)
        diag.error(c.pos("placement.ranges." + policy.name), "placement.ranges." + policy.name,
                   p + " generates on the policy's ranks, so the policy needs every rank (its range has " +
                       std::to_string(train.count) + " of " + std::to_string(opt.world) + ")",
                   "give generation its own range (placement.ranges." + policy.name + ".rollout) or widen the policy's");
      return false;
    }
    if (train.first != 0)
      diag.error(c.pos("placement.ranges." + policy.name), "placement.ranges." + policy.name,
                 "the trainer's ranks must start at rank 0, which writes metrics.jsonl and checkpoints' state",
                 "put `" + policy.name + "` first, e.g. " + policy.name + ": [0, " + std::to_string(train.count - 1) + "]");
    return true;
  }

  void trainer_placement(const RlStage& s, const std::string& p, const ModelConfig& policy, const std::string& critic) {
    // The trainer, its generation, and a reference, critic or reward model on ranks of their own (algo/remote_*.h):
    // distinct ranges (exact shares count once; partial overlaps are reported with the ranges) must cover the world.
    std::set<std::pair<int64_t, int64_t>> ranges;
    for (const std::string& role : {policy.name, policy.name + ".rollout", s.reference, critic}) {
      if (role.empty()) continue;
      const RankSpan r = ranks_of(c, role, opt.world);
      ranges.insert({r.first, r.count});
    }
    for (const auto& r : s.rewards)
      if (const RewardConfig* rc = c.find_reward(r); rc && rc->type == RewardType::model)
        if (const RankSpan span = reward_model_placement(s, p, policy, critic, *rc); span.count > 0)
          ranges.insert({span.first, span.count});
    int64_t used = 0;
    for (const auto& r : ranges) used += r.second;
    if (opt.world > 0 && used != opt.world)
      diag.error(c.pos("placement.ranges"), "placement.ranges",
                 p + " uses " + std::to_string(used) + " of " + std::to_string(opt.world) +
                     " ranks (trainer, generation, reference, critic, reward models); every rank takes part in its "
                     "weight syncs",
                 "run with " + std::to_string(used) + " ranks or widen the ranges");
  }

  // A model reward scores where responses are generated, round by round (algo/objectives/remote_reward.h): on the
  // generation's ranks exactly, or on ranks no other role of the stage uses. Returns its ranks.
  RankSpan reward_model_placement(const RlStage& s, const std::string& p, const ModelConfig& policy,
                                  const std::string& critic, const RewardConfig& rc) {
    const RankSpan mine = ranks_of(c, rc.model, opt.world), gen = ranks_of(c, policy.name + ".rollout", opt.world);
    if (mine.count == 0 || (mine.first == gen.first && mine.count == gen.count)) return mine;
    for (const std::string& role : {policy.name, policy.name + ".rollout", s.reference, critic}) {
      if (role.empty() || role == rc.model) continue;
      const RankSpan other = ranks_of(c, role, opt.world);
      if (other.count == 0 || mine.first + mine.count <= other.first || other.first + other.count <= mine.first) continue;
      const std::string range = "[" + std::to_string(gen.first) + ", " + std::to_string(gen.first + gen.count - 1) + "]";
      diag.error(c.pos("placement.ranges." + rc.model), "placement.ranges." + rc.model,
                 "reward '" + rc.name + "' scores responses where they are generated, round by round, so its model '" +
                     rc.model + "' needs the generation's ranks exactly or ranks of its own; it shares ranks with '" +
                     role + "'",
                 "give " + rc.model + " the range " + range + " (beside generation) or ranks no other role uses");
      return {0, 0};
    }
    return mine;
  }

  void stage(const StageConfig& st) {
    std::visit([&](const auto& body) { check_stage(body, st.path); }, st.body);
  }

  void check_stage(const SftStage& s, const std::string& p) {
    const ModelConfig* m = role(s.model, p + ".model");
    trained(m, p + ".model", Head::lm);
    data(s.data, p + ".data");
    batch_split(m, s.batch, p + ".batch", "global batch");
    early_stop(s.stop_at_accuracy, s.eval_every, s.data, p);
  }

  void check_stage(const GrpoStage& s, const std::string& p) {
    const ModelConfig* policy = role(s.policy, p + ".policy");
    rl(s, p, policy);
    rl_placement(s, p, policy, "");
  }

  void check_stage(const PpoStage& s, const std::string& p) {
    const ModelConfig* policy = role(s.policy, p + ".policy");
    rl(s, p, policy);
    rl_placement(s, p, policy, s.critic);
    const ModelConfig* critic = role(s.critic, p + ".critic");
    if (critic && critic == policy)
      diag.error(c.pos(p + ".critic"), p + ".critic", "the critic is the policy itself",
                 "add a critic role, e.g. `critic: {init: {from: " + policy->name + "}, head: value}`");
    else
      trained(critic, p + ".critic", Head::value);
  }

  void check_stage(const DistillStage& s, const std::string& p) {
    const ModelConfig* teacher = role(s.teacher, p + ".teacher");
    const ModelConfig* student = role(s.student, p + ".student");
    expect_head(teacher, p + ".teacher", Head::lm);
    if (teacher != student) trained(student, p + ".student", Head::lm);
    same_vocab(teacher, student, p + ".student", "distillation compares their distributions token by token");
    data(s.data, p + ".data");
    batch_split(student, s.batch, p + ".batch", "global batch");
    early_stop(s.stop_at_accuracy, s.eval_every, s.data, p);
    if (s.on_policy) distill_generation(student, p);
    if (s.sequence_level) distill_generation(teacher, p);
    if (teacher && student) distill_placement(s, p, *teacher, *student);
  }

  // Distillation generates with its roles' own models: a generation copy (own ranks or layout) is not used there yet.
  void distill_generation(const ModelConfig* m, const std::string& p) {
    if (!m) return;
    const auto &t = m->parallel, &g = m->rollout.parallel;
    if (t.tp != g.tp || t.sp != g.sp || t.ep != g.ep)
      diag.error(c.pos("models." + m->name + ".rollout.parallel"), "models." + m->name + ".rollout.parallel",
                 p + " generates with '" + m->name + "' in its training layout; a generation layout of its own is "
                 "used by grpo and ppo stages only so far",
                 "remove models." + m->name + ".rollout.parallel");
    if (c.placement.mode != PlacementMode::disaggregated) return;
    const RankSpan own = ranks_of(c, m->name, opt.world), gen = ranks_of(c, m->name + ".rollout", opt.world);
    if (gen.count > 0 && (gen.first != own.first || gen.count != own.count))
      diag.error(c.pos("placement.ranges." + m->name + ".rollout"), "placement.ranges." + m->name + ".rollout",
                 p + " generates with '" + m->name + "' on its own ranks; distillation with generation on ranks of "
                 "its own is not built yet",
                 "remove placement.ranges." + m->name + ".rollout (grpo and ppo stages use it)");
  }

  // A teacher on ranks of its own answers the student's top-k requests (algo/remote/remote_teacher.h).
  void distill_placement(const DistillStage& d, const std::string& p, const ModelConfig& teacher,
                         const ModelConfig& student) {
    if (c.placement.mode != PlacementMode::disaggregated) return;
    const RankSpan t = ranks_of(c, teacher.name, opt.world), s = ranks_of(c, student.name, opt.world);
    if (t.first == s.first || t.count == 0 || s.count == 0) return;  // shared exactly, or reported as missing
    const std::string path = "placement.ranges." + teacher.name;
    if (d.sequence_level)
      diag.error(c.pos(path), path, p + " is sequence-level (the teacher generates the responses), and a teacher on "
                 "ranks of its own only answers top-k requests so far",
                 "give `" + teacher.name + "` the student's range or use logit distillation");
    if (s.first != 0)
      diag.error(c.pos("placement.ranges." + student.name), "placement.ranges." + student.name,
                 "the student's ranks must start at rank 0, which writes metrics.jsonl and checkpoints' state",
                 "put `" + student.name + "` first, e.g. " + student.name + ": [0, " + std::to_string(s.count - 1) + "]");
  }

  void reward_models() {
    for (const auto& r : c.rewards) {
      if (r.type != RewardType::model) continue;
      std::string path = "rewards." + r.name + ".model";
      expect_head(role(r.model, path), path, Head::value);
    }
  }

  // Does `name` still have random weights when stage `at` starts? (preset and
  // not trained before; init.from snapshots its source at first use.)
  bool random_at(const std::string& name, size_t at, int depth = 0) {
    const ModelConfig* m = c.find_model(name);
    if (!m || depth > 16) return false;
    for (size_t i = 0; i < at && i < c.stages.size(); ++i)
      for (const auto& r : c.stages[i].trained_roles())
        if (r == name) return false;
    if (m->init.kind == InitKind::path) return false;
    if (m->init.kind == InitKind::preset) return true;
    size_t first_use = at;
    for (size_t i = 0; i < c.stages.size(); ++i) {
      auto used = c.stages[i].used_roles();
      if (std::find(used.begin(), used.end(), name) != used.end()) {
        first_use = i;
        break;
      }
    }
    return random_at(m->init.from, first_use, depth + 1);
  }

  void order() {
    for (size_t i = 0; i < c.stages.size(); ++i) {
      const StageConfig& st = c.stages[i];
      auto check = [&](const std::string& name, const std::string& key, const std::string& what) {
        if (!name.empty() && c.find_model(name) && random_at(name, i))
          diag.warning(c.pos(st.path + "." + key), st.path + "." + key,
                       "'" + name + "' still has random weights here (" + what + ")",
                       "train it in an earlier stage or initialise it from a checkpoint (init.path)");
      };
      if (const auto* d = st.as<DistillStage>()) check(d->teacher, "teacher", "a preset no earlier stage trains");
      if (const RlStage* r = st.rl()) check(r->policy, "policy", "RL rarely learns from scratch; add an sft stage first");
    }
  }

  void unused() {
    std::set<std::string> used_roles, used_data, used_rewards;
    for (const auto& st : c.stages) {
      for (const auto& r : st.used_roles()) used_roles.insert(r);
      used_data.insert(st.data());
      if (const RlStage* r = st.rl()) used_rewards.insert(r->rewards.begin(), r->rewards.end());
    }
    for (const auto& r : c.rewards)
      if (used_rewards.count(r.name) && r.type == RewardType::model) used_roles.insert(r.model);
    for (const auto& m : c.models)
      if (m.init.kind == InitKind::from && used_roles.count(m.name)) used_roles.insert(m.init.from);
    for (const auto& m : c.models)
      if (!used_roles.count(m.name))
        diag.warning(c.pos("models." + m.name), "models." + m.name, "no stage uses this role", "remove it or use it in a stage");
    for (const auto& d : c.data)
      if (!used_data.count(d.name))
        diag.warning(c.pos("data." + d.name), "data." + d.name, "no stage uses this dataset", "remove it or use it in a stage");
    for (const auto& r : c.rewards)
      if (!used_rewards.count(r.name))
        diag.warning(c.pos("rewards." + r.name), "rewards." + r.name, "no stage uses this reward", "remove it or use it in a stage");
  }

  void reward_programs() {
    for (const auto& r : c.rewards) {
      if (r.type != RewardType::command) continue;
      std::string prog = reward_program(r.command);
      if (prog.empty() || program_found(prog)) continue;
      std::string path = "rewards." + r.name + ".command";
      std::string msg = prog.find('/') != std::string::npos
                            ? "program '" + prog + "' does not exist or is not executable"
                            : "program '" + prog + "' is not on PATH";
      std::string fix = "install it or correct the command (relative paths start at the current directory)";
      if (opt.require_weights) diag.error(c.pos(path), path, msg, fix);
      else diag.warning(c.pos(path), path, msg, fix + "; `run` stops here unless it exists where the job runs");
    }
  }

  void data_files() {
    namespace stdfs = std::filesystem;
    for (const auto& d : c.data) {
      if (d.kind != DataKind::jsonl) continue;
      for (const auto& [key, file] : {std::pair<std::string, std::string>{"path", d.jsonl.path}, {"eval_path", d.jsonl.eval_path}}) {
        if (file.empty()) continue;
        std::error_code ec;
        if (stdfs::is_regular_file(file, ec)) continue;
        std::string path = "data." + d.name + ".jsonl." + key;
        diag.error(c.pos(path), path,
                   stdfs::is_directory(file, ec) ? "'" + file + "' is a directory, not a JSONL file"
                                                 : "file '" + file + "' does not exist",
                   "give the path of a .jsonl file (relative paths start at the current directory)");
      }
      if (!d.jsonl.eval_path.empty() && d.jsonl.eval_holdout > 0) {
        std::string path = "data." + d.name + ".jsonl.eval_holdout";
        diag.error(c.pos(path), path, "both eval_path and eval_holdout give a held-out split",
                   "keep one of them");
      }
    }
  }
};

}  // namespace

void validate_stages(const PipelineConfig& c, const ValidateOptions& opt, Diagnostics& diag) {
  StageChecker k{c, opt, diag, {}, {}, {}};
  for (const auto& m : c.models) k.roles.push_back(m.name);
  for (const auto& d : c.data) k.datasets.push_back(d.name);
  for (const auto& r : c.rewards) k.rewards.push_back(r.name);
  for (const auto& st : c.stages) k.stage(st);
  k.reward_models();
  k.reward_programs();
  k.data_files();
  k.order();
  k.unused();
  if (c.trace.tensorboard && !c.trace.metrics)
    diag.error(c.pos("trace.tensorboard"), "trace.tensorboard",
               "the TensorBoard scalars mirror metrics.jsonl's lines, which trace.metrics: false turns off",
               "set trace.metrics: true, or remove trace.tensorboard");
}

}  // namespace hpcrl::config
