// Schema of the `stages` list: each item is a one-key mapping naming the stage
// kind (sft, grpo, ppo, distill) with its parameters. Optimizer and sampling
// knobs are flat keys in YAML (`lr: 1e-5`, `temperature: 1.0`) but grouped
// into TrainHparams / SamplingConfig in C++, because the optimizer and the
// rollout engine take them as one value. Checks that involve only one stage
// live here; checks against other sections (does the role exist, is it frozen)
// live in validate.cpp.
#include <cmath>

#include "config/schema_sections.h"

namespace hpcrl::config::schema {

namespace {

template <class S>
void add_train_fields(std::vector<Field<S>>& f) {
  f.push_back(field<S>("lr", [](auto& s) -> auto& { return s.train.lr; }, number(0, 1, Bound::kOpen)));
  f.push_back(field<S>("warmup", [](auto& s) -> auto& { return s.train.warmup; }, integer(0)));
  f.push_back(field<S>("schedule", [](auto& s) -> auto& { return s.train.schedule; }, enumeration<LrSchedule>()));
  f.push_back(field<S>("min_lr_ratio", [](auto& s) -> auto& { return s.train.min_lr_ratio; }, number(0, 1)));
  f.push_back(field<S>("weight_decay", [](auto& s) -> auto& { return s.train.weight_decay; }, number(0, 10)));
  f.push_back(field<S>("grad_clip", [](auto& s) -> auto& { return s.train.grad_clip; }, number(0, HUGE_VAL)));
  f.push_back(field<S>("micro_batch", [](auto& s) -> auto& { return s.train.micro_batch; }, integer(0)));
  f.push_back(field<S>("micro_batch_tokens", [](auto& s) -> auto& { return s.train.micro_batch_tokens; }, integer(0)));
  f.push_back(field<S>("packing", [](auto& s) -> auto& { return s.train.packing; }, boolean()));
  // Both written back only when they change something, as the old configs had neither.
  f.push_back(only_if<S>(
      field<S>("on_nonfinite", [](auto& s) -> auto& { return s.train.on_nonfinite; }, enumeration<OnNonFinite>()),
      [](const S& s) { return s.train.on_nonfinite != OnNonFinite::stop; }));
  f.push_back(only_if<S>(
      field<S>("max_consecutive_skips", [](auto& s) -> auto& { return s.train.max_consecutive_skips; }, integer(1)),
      [](const S& s) { return s.train.on_nonfinite == OnNonFinite::skip_step; }));
}

// max_consecutive_skips counts skipped steps, which only on_nonfinite: skip_step makes.
template <class S>
void check_train_fields(const S& s, const YNode& n, const std::string& path, Reading& reading) {
  if (s.train.on_nonfinite != OnNonFinite::skip_step && n.find("max_consecutive_skips"))
    error_at_key(reading, n, path, "max_consecutive_skips",
                 "applies only to on_nonfinite: skip_step (this stage stops at the first non-finite gradient)",
                 "remove max_consecutive_skips or set `on_nonfinite: skip_step`");
}

// Distillation's `top_k` is the teacher's logit top-k, so there `with_top_k` is false.
template <class S>
void add_sampling_fields(std::vector<Field<S>>& f, bool with_top_k = true) {
  f.push_back(field<S>("max_new_tokens", [](auto& s) -> auto& { return s.sampling.max_new_tokens; }, integer(1)));
  f.push_back(field<S>("temperature", [](auto& s) -> auto& { return s.sampling.temperature; }, number(0, 100)));
  f.push_back(field<S>("top_p", [](auto& s) -> auto& { return s.sampling.top_p; }, number(0, 1, Bound::kOpen)));
  if (with_top_k) f.push_back(field<S>("top_k", [](auto& s) -> auto& { return s.sampling.top_k; }, integer(0)));
  f.push_back(field<S>("stop", [](auto& s) -> auto& { return s.sampling.stop; }, list_of(text(), 0, SIZE_MAX, true)));
}

// `stop_at_accuracy` is written back only when set; 0 (off) lets `--set` turn a config's target off.
template <class S>
Field<S> stop_at_accuracy_field() {
  return only_if<S>(field<S>("stop_at_accuracy", [](auto& s) -> auto& { return s.stop_at_accuracy; },
                             number(0, 1)),
                    [](const S& s) { return s.stop_at_accuracy > 0; });
}

// `clip: 0.2` (symmetric) or `clip: [low, high]` (DAPO clip-higher).
template <class S>
Field<S> clip_field() {
  // low in (0, 1]: 1 puts no floor under the ratio (CISPO); high > 0 without a
  // ceiling: CISPO's weight cap and DAPO's clip-higher may exceed 1.
  auto low = number(0, 1, Bound::kOpen, Bound::kClosed);
  auto high = number(0, HUGE_VAL, Bound::kOpen);
  auto two = list_of(number(0, HUGE_VAL, Bound::kOpen), 2, 2);
  Field<S> f;
  f.name = "clip";
  f.type = "a number in (0, 1] or [low, high]";
  f.read = [=](S& s, const YNode& n, const std::string& p, Reading& reading) {
    if (n.is_scalar()) {
      double v = 0;
      if (!low.read(n, p, reading, v)) return false;
      s.clip_low = s.clip_high = v;
      return true;
    }
    std::vector<double> v;
    if (!two.read(n, p, reading, v)) return false;
    if (v[0] > 1) {
      reading.error(n.pos, p, "low clip " + format_number(v[0]) + " is above 1, so the ratio's floor would be negative",
                    "use a low clip in (0, 1]; 1 means no floor");
      return false;
    }
    s.clip_low = v[0];
    s.clip_high = v[1];
    return true;
  };
  f.write = [two](const S& s) { return two.write({s.clip_low, s.clip_high}); };
  return f;
}

Codec<SftStage> sft_codec() {
  using S = SftStage;
  std::vector<Field<S>> f{
      field<S>("model", [](auto& s) -> auto& { return s.model; }, name_ref(), kRequired),
      field<S>("data", [](auto& s) -> auto& { return s.data; }, name_ref(), kRequired),
      field<S>("steps", [](auto& s) -> auto& { return s.steps; }, integer(1), kRequired),
      field<S>("batch", [](auto& s) -> auto& { return s.batch; }, integer(1), kRequired),
  };
  add_train_fields(f);
  f.push_back(field<S>("eval_every", [](auto& s) -> auto& { return s.eval_every; }, integer(0)));
  f.push_back(stop_at_accuracy_field<S>());
  f.push_back(only_if<S>(field<S>("tools", [](auto& s) -> auto& { return s.tools; }, stage_tools_codec()),
                         [](const S& s) { return s.tools.enabled(); }));
  StructSpec<S> spec{"an sft stage", std::move(f)};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    check_train_fields(s, n, path, reading);
  };
  return structure<S>(std::move(spec));
}

Codec<KlConfig> kl_codec() {
  using S = KlConfig;
  StructSpec<S> spec{"KL settings", {
      field<S>("coef", [](auto& s) -> auto& { return s.coef; }, number(0, HUGE_VAL)),
      field<S>("estimator", [](auto& s) -> auto& { return s.estimator; }, enumeration<KlEstimator>()),
      field<S>("in_reward", [](auto& s) -> auto& { return s.in_reward; }, boolean()),
  }};
  spec.scalar_key = "coef";  // `kl: 0.001` (TRL's beta, veRL's kl_coef) is the coefficient
  return structure<S>(std::move(spec));
}

Codec<OverlongConfig> overlong_codec() {
  using S = OverlongConfig;
  return structure<S>({"overlong-response settings", {
      field<S>("filter", [](auto& s) -> auto& { return s.filter; }, boolean()),
      field<S>("penalty", [](auto& s) -> auto& { return s.penalty; }, number(0, HUGE_VAL)),
      field<S>("buffer", [](auto& s) -> auto& { return s.buffer; }, integer(0)),
  }});
}

Codec<AsyncConfig> async_codec() {
  using S = AsyncConfig;
  return structure<S>({"asynchronous RL settings", {
      field<S>("max_staleness", [](auto& s) -> auto& { return s.max_staleness; }, integer(0)),
      field<S>("partial_rollouts", [](auto& s) -> auto& { return s.partial_rollouts; }, boolean()),
      field<S>("keep_stale_cache", [](auto& s) -> auto& { return s.keep_stale_cache; }, boolean()),
  }});
}

template <class S>
std::vector<Field<S>> rl_fields() {
  std::vector<Field<S>> f{
      field<S>("policy", [](auto& s) -> auto& { return s.policy; }, name_ref(), kRequired),
      only_if<S>(field<S>("reference", [](auto& s) -> auto& { return s.reference; }, name_ref()),
                 [](const S& s) { return !s.reference.empty(); }),
      field<S>("reward", [](auto& s) -> auto& { return s.rewards; }, list_of(name_ref(), 1, SIZE_MAX, true), kRequired),
      field<S>("data", [](auto& s) -> auto& { return s.data; }, name_ref(), kRequired),
      field<S>("iterations", [](auto& s) -> auto& { return s.iterations; }, integer(1), kRequired),
      field<S>("prompts", [](auto& s) -> auto& { return s.prompts; }, integer(1), kRequired),
      field<S>("group", [](auto& s) -> auto& { return s.group; }, integer(1)),
  };
  add_sampling_fields(f);
  add_train_fields(f);
  f.push_back(clip_field<S>());
  f.push_back(field<S>("kl", [](auto& s) -> auto& { return s.kl; }, kl_codec()));
  f.push_back(field<S>("loss_agg", [](auto& s) -> auto& { return s.loss_agg; }, enumeration<LossAgg>()));
  f.push_back(field<S>("policy_loss", [](auto& s) -> auto& { return s.policy_loss; }, enumeration<PolicyLossKind>()));
  f.push_back(field<S>("epochs", [](auto& s) -> auto& { return s.epochs; }, integer(1)));
  f.push_back(field<S>("mini_batch", [](auto& s) -> auto& { return s.mini_batch; }, integer(0)));
  f.push_back(field<S>("dynamic_sampling", [](auto& s) -> auto& { return s.dynamic_sampling; }, boolean()));
  f.push_back(field<S>("overlong", [](auto& s) -> auto& { return s.overlong; }, overlong_codec()));
  f.push_back(field<S>("entropy_coef", [](auto& s) -> auto& { return s.entropy_coef; }, number(0, 1)));
  f.push_back(field<S>("recompute_old_logprobs", [](auto& s) -> auto& { return s.recompute_old_logprobs; }, boolean()));
  f.push_back(field<S>("async", [](auto& s) -> auto& { return s.async; }, async_codec()));
  f.push_back(field<S>("tis_cap", [](auto& s) -> auto& { return s.tis_cap; }, number(0, HUGE_VAL)));
  f.push_back(field<S>("logprob_mismatch_every", [](auto& s) -> auto& { return s.logprob_mismatch_every; },
                       integer(0)));
  f.push_back(field<S>("eval_every", [](auto& s) -> auto& { return s.eval_every; }, integer(0)));
  f.push_back(stop_at_accuracy_field<S>());
  f.push_back(only_if<S>(field<S>("tools", [](auto& s) -> auto& { return s.tools; }, stage_tools_codec()),
                         [](const S& s) { return s.tools.enabled(); }));
  return f;
}

bool given(const Reading& reading, const std::string& path, const std::string& key) {
  return reading.key_positions.count(join_path(path, key)) > 0;
}

// The surrogate's own defaults where the file leaves them out: GSPO clips a
// sequence-level ratio, which moves far less than a token's (the paper's
// [3e-4, 4e-4]), and averages per sequence; CISPO caps the weight from above
// only (MiniMax-M1 sets no floor).
void resolve_policy_loss_defaults(RlStage& s, const Reading& reading, const std::string& path) {
  const bool gspo = s.policy_loss == PolicyLossKind::gspo || s.policy_loss == PolicyLossKind::gspo_token;
  if (gspo && !given(reading, path, "clip")) s.clip_low = 3e-4, s.clip_high = 4e-4;
  if (gspo && !given(reading, path, "loss_agg")) s.loss_agg = LossAgg::seq_mean_token_mean;
  if (s.policy_loss == PolicyLossKind::cispo && !given(reading, path, "clip")) s.clip_low = 1.0, s.clip_high = 0.28;
}

// Checks that GRPO and PPO share.
void check_rl(RlStage& s, const YNode& n, const std::string& path, Reading& reading) {
  check_train_fields(s, n, path, reading);
  resolve_policy_loss_defaults(s, reading, path);
  // A swapped pair, unless CISPO, whose weight has no floor (low 1) and a cap above 1.
  if (s.clip_high < s.clip_low && s.policy_loss != PolicyLossKind::cispo)
    reading.error(reading.value_pos(join_path(path, "clip"), n.pos), join_path(path, "clip"),
                  "high clip " + format_number(s.clip_high) + " is below low clip " + format_number(s.clip_low),
                  "write [low, high] with low ≤ high, e.g. [0.2, 0.28]");
  int64_t batch = s.responses();
  if (s.mini_batch > 0 && batch % s.mini_batch != 0)
    error_at_key(reading, n, path, "mini_batch",
                 "prompts·group = " + std::to_string(s.prompts) + "·" + std::to_string(s.group) + " = " +
                     std::to_string(batch) + " sequences is not a multiple of mini_batch " + std::to_string(s.mini_batch),
                 "use a mini_batch that divides " + std::to_string(batch));
  if (s.overlong.buffer >= s.sampling.max_new_tokens && s.overlong.buffer > 0)
    reading.error(reading.value_pos(join_path(path, "overlong.buffer"), n.pos), join_path(path, "overlong.buffer"),
              "overlong buffer " + std::to_string(s.overlong.buffer) + " is not below max_new_tokens " +
                  std::to_string(s.sampling.max_new_tokens),
              "use a buffer smaller than max_new_tokens (DAPO uses max_new_tokens/4)");
  if (s.tis_cap > 0 && s.tis_cap < 1)
    error_at_key(reading, n, path, "tis_cap",
                 "a truncated importance weight cap of " + format_number(s.tis_cap) +
                     " is below 1, so it would down-weight on-policy tokens too",
                 "use a cap ≥ 1 (veRL and slime use 2) or 0 to turn truncation off");
  // tis_cap weighs by π_old/π_behaviour, which needs the trainer's own π_old; asynchronous generation defaults to
  // the decoupled objective and takes the coupled one when the file writes recompute_old_logprobs: false.
  const bool recompute_given = given(reading, path, "recompute_old_logprobs");
  if (s.tis_cap > 0 && !s.recompute_old_logprobs && recompute_given)
    error_at_key(reading, n, path, "recompute_old_logprobs",
                 "recompute_old_logprobs: false, but tis_cap weighs each token by π_old/π_behaviour, which needs the "
                 "trainer's own old log-probs beside the engine's",
                 "remove recompute_old_logprobs (tis_cap implies it) or set tis_cap: 0");
  if ((s.async.max_staleness > 0 || s.tis_cap > 0) && !recompute_given)
    s.recompute_old_logprobs = true;  // the resolved config says what runs
  if (s.kl.coef > 0 && s.reference.empty())
    reading.error(reading.value_pos(join_path(path, "kl.coef"), n.pos), join_path(path, "kl.coef"),
              "KL coefficient " + format_number(s.kl.coef) + " needs a reference model",
              "add `reference: ROLE` (e.g. a role with `init: {from: policy}, frozen: true`) or set kl.coef: 0");
  // Not when the stage has errors: `kl: 0.001` or `kl_coef: 0.001` leaves kl.coef unread, and the error says why.
  const bool stage_refused = std::any_of(reading.diag.errors.begin(), reading.diag.errors.end(),
                                         [&](const Diagnostic& d) { return str::starts_with(d.path, path + "."); });
  if (s.kl.coef == 0 && !s.reference.empty() && !stage_refused)
    reading.diag.warning(reading.key_pos(join_path(path, "reference"), n.pos), join_path(path, "reference"),
                         "is loaded but unused: kl.coef is 0, so the stage has no KL term",
                         "remove `reference`, or set `kl: {coef: ...}` above 0");
}

// The estimator's normalisation when the file leaves it out, then the
// combinations that cannot mean what they say.
void check_advantage(GrpoStage& s, const YNode& n, const std::string& path, Reading& reading) {
  using E = AdvantageEstimator;
  const bool token_level = s.advantage == E::reinforce_pp || s.advantage == E::reinforce_pp_baseline;
  if (!given(reading, path, "std_norm"))
    s.std_norm = token_level ? StdNorm::batch : s.advantage == E::rloo ? StdNorm::none : StdNorm::group;
  const bool needs_group = s.advantage != E::reinforce_pp;
  if (needs_group && s.group < 2)
    error_at_key(reading, n, path, "group",
                 "advantage " + to_string(s.advantage) + " compares a sample with the others of its group, so group must be ≥ 2 (got " +
                     std::to_string(s.group) + ")",
                 "use group: 8, or advantage: reinforce_pp for one response per prompt");
  if (token_level && s.std_norm == StdNorm::group)
    error_at_key(reading, n, path, "std_norm",
                 to_string(s.advantage) + " whitens token returns over the whole batch; a group std has no meaning for it",
                 "use std_norm: batch (its definition) or none");
  if (token_level && s.policy_loss == PolicyLossKind::gspo)
    error_at_key(reading, n, path, "policy_loss",
                 "gspo weights a sequence by one ratio and needs one advantage per sequence, but " +
                     to_string(s.advantage) + " gives token-level advantages",
                 "use policy_loss: gspo_token (the token-level variant) or a grpo/rloo advantage");
}

Codec<GrpoStage> grpo_codec() {
  using S = GrpoStage;
  StructSpec<S> spec{"a grpo stage", rl_fields<S>()};
  spec.fields.push_back(field<S>("advantage", [](auto& s) -> auto& { return s.advantage; }, enumeration<AdvantageEstimator>()));
  spec.fields.push_back(field<S>("std_norm", [](auto& s) -> auto& { return s.std_norm; }, enumeration<StdNorm>()));
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    check_advantage(s, n, path, reading);
    check_rl(s, n, path, reading);
  };
  return structure<S>(std::move(spec));
}

Codec<PpoStage> ppo_codec() {
  using S = PpoStage;
  StructSpec<S> spec{"a ppo stage", rl_fields<S>()};
  auto& f = spec.fields;
  f.push_back(field<S>("critic", [](auto& s) -> auto& { return s.critic; }, name_ref(), kRequired));
  f.push_back(field<S>("gamma", [](auto& s) -> auto& { return s.gamma; }, number(0, 1)));
  f.push_back(field<S>("lam", [](auto& s) -> auto& { return s.lam; }, number(0, 1)));
  f.push_back(field<S>("value_clip", [](auto& s) -> auto& { return s.value_clip; }, number(0, HUGE_VAL)));
  f.push_back(field<S>("critic_warmup", [](auto& s) -> auto& { return s.critic_warmup; }, integer(0)));
  f.push_back(field<S>("critic_lr", [](auto& s) -> auto& { return s.critic_lr; }, number(0, 1, Bound::kOpen)));
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    if (s.critic_warmup >= s.iterations)
      error_at_key(reading, n, path, "critic_warmup",
                   "critic warm-up (" + std::to_string(s.critic_warmup) + ") leaves no policy iterations of " +
                       std::to_string(s.iterations),
                   "use fewer warm-up iterations than `iterations`");
    if (s.policy_loss == PolicyLossKind::gspo)
      error_at_key(reading, n, path, "policy_loss",
                   "gspo weights a sequence by one ratio and needs one advantage per sequence, but PPO's GAE gives "
                   "one per token",
                   "use policy_loss: gspo_token (the token-level variant)");
    check_rl(s, n, path, reading);
  };
  return structure<S>(std::move(spec));
}

Codec<DistillStage> distill_codec() {
  using S = DistillStage;
  std::vector<Field<S>> f{
      field<S>("teacher", [](auto& s) -> auto& { return s.teacher; }, name_ref(), kRequired),
      field<S>("student", [](auto& s) -> auto& { return s.student; }, name_ref(), kRequired),
      field<S>("data", [](auto& s) -> auto& { return s.data; }, name_ref(), kRequired),
      field<S>("loss", [](auto& s) -> auto& { return s.loss; }, enumeration<DistillLoss>()),
      field<S>("beta", [](auto& s) -> auto& { return s.beta; }, number(0, 1, Bound::kOpen, Bound::kOpen)),
      field<S>("top_k", [](auto& s) -> auto& { return s.top_k; }, integer(0)),
      field<S>("on_policy", [](auto& s) -> auto& { return s.on_policy; }, boolean()),
      field<S>("sequence_level", [](auto& s) -> auto& { return s.sequence_level; }, boolean()),
      field<S>("steps", [](auto& s) -> auto& { return s.steps; }, integer(1), kRequired),
      field<S>("batch", [](auto& s) -> auto& { return s.batch; }, integer(1), kRequired),
  };
  add_sampling_fields(f, false);
  add_train_fields(f);
  f.push_back(field<S>("eval_every", [](auto& s) -> auto& { return s.eval_every; }, integer(0)));
  f.push_back(stop_at_accuracy_field<S>());
  // `beta` is only meaningful (and only rendered) for the JSD loss.
  for (auto& field : f)
    if (field.name == "beta") field.applies = [](const S& s) { return s.loss == DistillLoss::jsd; };
  StructSpec<S> spec{"a distill stage", std::move(f)};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    check_train_fields(s, n, path, reading);
    if (!s.teacher.empty() && s.teacher == s.student)
      error_at_key(reading, n, path, "student", "teacher and student are the same role '" + s.student + "'",
                   "distil into a different role (e.g. `student: {init: {preset: tiny-2l}}` under models)");
    if (s.loss != DistillLoss::jsd && n.find("beta"))
      error_at_key(reading, n, path, "beta", "applies only to loss: jsd (this stage uses " + to_string(s.loss) + ")",
                   "remove beta or set `loss: jsd`");
    if (s.on_policy && s.sequence_level)
      error_at_key(reading, n, path, "sequence_level",
                   "on_policy (student generates) and sequence_level (teacher generates) exclude each other",
                   "set one of them to false");
  };
  return structure<S>(std::move(spec));
}

const std::vector<std::string>& kind_names() { return names_of<StageKind>(); }

// The codec of each kind's body, picked by the body's type.
struct StageCodecs {
  Codec<SftStage> sft = sft_codec();
  Codec<GrpoStage> grpo = grpo_codec();
  Codec<PpoStage> ppo = ppo_codec();
  Codec<DistillStage> distill = distill_codec();

  const Codec<SftStage>& of(const SftStage&) const { return sft; }
  const Codec<GrpoStage>& of(const GrpoStage&) const { return grpo; }
  const Codec<PpoStage>& of(const PpoStage&) const { return ppo; }
  const Codec<DistillStage>& of(const DistillStage&) const { return distill; }
};

// Reads list item `item` (path `ip`), a one-key mapping `kind: body`, and
// appends the stage when its kind is known; false on any problem.
bool read_stage(const StageCodecs& codecs, const YNode& item, const std::string& ip, Reading& reading,
                std::vector<StageConfig>& out) {
  if (!item.is_map() || item.entries.empty()) {
    reading.error(item.pos, ip, "a stage is a one-key mapping naming its kind, got " + item.describe(),
              "write e.g. `- sft: {model: policy, data: arith, steps: 200, batch: 64}`");
    return false;
  }
  if (item.entries.size() > 1) {
    const YEntry& extra = item.entries[1];
    reading.error(extra.key_pos, ip + "." + extra.key,
              "one list item holds one stage, but this one also has '" + extra.key + "' after '" +
                  item.entries[0].key + "'",
              "indent the stage's parameters under its kind, or start the next stage with its own '- '");
    return false;
  }
  const YEntry& e = item.entries[0];
  std::string kp = ip + "." + e.key;
  auto kind = parse_enum<StageKind>(e.key);
  if (!kind) {
    unknown_word(reading, e.key_pos, kp, e.key, kind_names(), "stage kind");
    return false;
  }
  reading.positions[kp] = e.value.pos;
  reading.key_positions[kp] = e.key_pos;
  StageConfig st;
  st.path = kp;
  st.body = default_body(*kind);
  const bool ok = std::visit([&](auto& body) { return codecs.of(body).read(e.value, kp, reading, body); }, st.body);
  out.push_back(std::move(st));
  return ok;
}

bool read_stages(const StageCodecs& codecs, const YNode& n, const std::string& path, Reading& reading,
                 std::vector<StageConfig>& out) {
  if (!n.is_seq() || n.items.empty()) {
    reading.error(n.pos, path, "expected a non-empty list of stages, got " + n.describe(),
              "write stages as a list: `- sft: {model: policy, data: arith, steps: 200, batch: 64}`");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < n.items.size(); ++i)
    ok = read_stage(codecs, n.items[i], path + "[" + std::to_string(i) + "]", reading, out) && ok;
  return ok;
}

YNode write_stages(const StageCodecs& codecs, const std::vector<StageConfig>& stages) {
  YNode seq = YNode::seq_node();
  for (const auto& st : stages) {
    YNode item = YNode::map_node();
    YNode body = std::visit([&](const auto& b) { return codecs.of(b).write(b); }, st.body);
    item.entries.push_back({to_string(st.kind()), {}, std::move(body)});
    seq.items.push_back(std::move(item));
  }
  return seq;
}

// Key paths of every kind's body, in StageKind's order: `<prefix>[].sft.model`, ...
void stage_keys(const StageCodecs& codecs, const std::string& prefix, std::vector<std::string>& out) {
  for (size_t k = 0; k < kind_names().size(); ++k) {
    const auto kind = static_cast<StageKind>(k);
    std::visit([&](const auto& b) { codecs.of(b).keys(prefix + "[]." + to_string(kind), out); }, default_body(kind));
  }
}

}  // namespace

Codec<std::vector<StageConfig>> stages_codec() {
  const StageCodecs codecs;
  Codec<std::vector<StageConfig>> c;
  c.type = "a list of stages (`- sft: {...}`, `- grpo: {...}`, `- ppo: {...}`, `- distill: {...}`)";
  c.read = [codecs](const YNode& n, const std::string& path, Reading& reading, std::vector<StageConfig>& out) {
    return read_stages(codecs, n, path, reading, out);
  };
  c.write = [codecs](const std::vector<StageConfig>& stages) { return write_stages(codecs, stages); };
  c.keys = [codecs](const std::string& prefix, std::vector<std::string>& out) { stage_keys(codecs, prefix, out); };
  return c;
}

}  // namespace hpcrl::config::schema
