// Shared GRPO/PPO machinery (see rl_common.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/rl_common.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "hpcrl/algo/evaluation.h"
#include "hpcrl/algo/forward_backward.h"
#include "hpcrl/algo/micro_batches.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/rollout_copy.h"
#include "hpcrl/algo/stage_loop.h"
#include "hpcrl/algo/step_sums.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
constexpr int64_t kMaxSamplingRounds = 4;  // dynamic sampling: 1 + up to 3 refills
}  // namespace

void RolloutSamples::append(const RolloutSamples& o, size_t first, size_t count) {
  for (size_t k = first; k < first + count; ++k) {
    prompt_ids.push_back(o.prompt_ids[k]);
    response_ids.push_back(o.response_ids[k]);
    logprobs.push_back(o.logprobs[k]);
    example.push_back(o.example[k]);
    scores.push_back(o.scores[k]);
    truncated.push_back(o.truncated[k]);
  }
}

RlLoop::RlLoop(StageEnv& env, const config::RlStage& cfg, Role& policy, Role* reference, const DataSplits& data,
               std::string stage_name)
    : env_(env), cfg_(cfg), policy_(policy), reference_(reference), data_(data), name_(std::move(stage_name)),
      rewards_(env, cfg.rewards, policy, cfg.train.micro_batch) {
  HPCRL_CHECK_INPUT(policy.member(), env.stage->path << ": every rank must hold the policy in this build "
                    "(disaggregated RL placement is not available yet); use placement.mode: colocated");
  prompts_ = std::make_unique<PromptBuilder>(*policy.tokenizer, env.pipeline->find_data(cfg.data));
  sampler_ = std::make_unique<io::DataSampler>(data.train.size(),
                                               static_cast<uint64_t>(env.pipeline->run.seed) + 17u * env.stage_index,
                                               env.pipeline->find_data(cfg.data)->shuffle);
  // A pipelined policy samples from its pp = 1 copy, refreshed at each collect().
  engine_ = std::make_unique<rollout::Engine>(sync_rollout_model(policy), policy.tokenizer.get(),
                                              rollout::EngineOptions{policy.config->rollout.max_batch, true});
}

int64_t RlLoop::minibatches_per_epoch() const {
  const int64_t total = cfg_.prompts * cfg_.group;
  const int64_t mini = cfg_.mini_batch > 0 ? cfg_.mini_batch : total;
  return std::max<int64_t>(1, total / mini);
}

at::Tensor RlLoop::dp_sum(at::Tensor t) const {
  t = t.clone();
  if (policy_.ctx.dp && policy_.ctx.dp->size() > 1) policy_.ctx.dp->all_reduce(t);
  return t;
}

double RlLoop::timed(const std::string& span, RlMetrics& m, const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  {
    trace::ScopedSpan s(name_ + "/" + span);
    fn();
  }
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& [k, v] : m.seconds_by_span)
    if (k == span) return v += sec, sec;
  m.seconds_by_span.emplace_back(span, sec);
  return sec;
}

int64_t RlLoop::resume(const std::vector<TrainedRole>& saved) { return resume_stage(env_, saved, *sampler_, name_); }

void RlLoop::checkpoint(int64_t iteration, const std::vector<TrainedRole>& saved) {
  checkpoint_stage(env_, iteration, saved, *sampler_, name_);
}

RolloutSamples RlLoop::rollout_round(const std::vector<size_t>& rows, int64_t iteration, int64_t round,
                                     RlMetrics& m, RolloutSums& sums, double& max_response_len) {
  RolloutSamples out;
  std::vector<std::vector<int32_t>> p_ids;
  for (size_t i : rows) p_ids.push_back(prompts_->prompt_ids(data_.train[i]));
  rollout::SamplingParams sampling;
  sampling.temperature = cfg_.sampling.temperature;
  sampling.top_p = cfg_.sampling.top_p;
  sampling.top_k = cfg_.sampling.top_k;
  sampling.max_new_tokens = cfg_.sampling.max_new_tokens;
  sampling.stop = cfg_.sampling.stop;
  sampling.eos_ids = prompts_->stop_ids();
  sampling.seed = static_cast<uint64_t>(env_.pipeline->run.seed) * 1000003u + static_cast<uint64_t>(iteration) * 101u +
            static_cast<uint64_t>(round);
  sampling.prompt_offset = static_cast<int64_t>(policy_.dp_rank * rows.size());
  sampling.logprobs_at_temperature = true;
  std::vector<rollout::Sample> samples;
  timed("rollout", m, [&] {
    torch::NoGradGuard no_grad;
    policy_.model->eval();
    samples = engine_->generate(p_ids, cfg_.group, sampling);
    policy_.model->train();
  });
  timed("reward", m, [&] {
    const auto& ol = cfg_.overlong;
    // Scored as one batch, so a command reward streams the whole round to its program.
    std::vector<std::string> texts;
    std::vector<nlohmann::json> meta;
    for (const auto& s : samples) {
      const auto& ex = data_.train[rows[s.prompt_index]];
      texts.push_back(policy_.tokenizer->decode(s.tokens, /*skip_special=*/true));
      meta.push_back({{"stage", name_}, {"iteration", iteration}, {"example", rows[s.prompt_index]},
                      {"sample", s.sample_index}});
      if (ex.line > 0) meta.back()["line"] = ex.line;
    }
    std::vector<reward::RewardSample> batch;
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto& ex = data_.train[rows[samples[k].prompt_index]];
      batch.push_back({ex.prompt, texts[k], ex.answer, &meta[k]});
    }
    const std::vector<ScoredResponse> scored = rewards_.score_batch(batch, sample_ids(p_ids, samples));
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto& s = samples[k];
      const ScoredResponse& r = scored[k];
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      const bool truncated = s.finish_reason == "length";
      double score = r.score;
      // DAPO soft overlong punishment: ramps from 0 to -penalty over the last `buffer` tokens.
      if (ol.penalty > 0) {
        const int64_t limit = cfg_.sampling.max_new_tokens, start = limit - ol.buffer;
        if (ol.buffer > 0 && len > start) score -= ol.penalty * double(len - start) / double(ol.buffer);
        else if (ol.buffer == 0 && truncated) score -= ol.penalty;
      }
      out.prompt_ids.push_back(p_ids[s.prompt_index]);
      out.response_ids.push_back(s.tokens);
      out.logprobs.push_back(s.logprobs);
      out.example.push_back(rows[s.prompt_index]);
      out.scores.push_back(score);
      out.truncated.push_back(truncated);
      sums.score += score;
      sums.score_squared += score * score;
      sums.samples += 1;
      sums.correct += r.correct ? 1 : 0;
      sums.response_tokens += double(len);
      sums.tokens += double(len + p_ids[s.prompt_index].size());
      max_response_len = std::max(max_response_len, double(len));
    }
  });
  return out;
}

Experience RlLoop::collect(int64_t iteration, RlMetrics& m) {
  const int64_t local_prompts = policy_.local_batch(cfg_.prompts, env_.stage->path + ".prompts");
  const size_t G = static_cast<size_t>(cfg_.group);
  RolloutSums sums;
  double max_response_len = 0;
  RolloutSamples kept;
  int64_t kept_groups = 0, rounds = 0;
  // Weight sync: the rollout copy of a pipelined policy gets the updated weights.
  if (policy_.ctx.pp_size() > 1) timed("weight_sync", m, [&] { sync_rollout_model(policy_); });
  while (true) {
    auto rows = sampler_->next_batch(cfg_.prompts, policy_.dp_rank, policy_.dp_size);
    RolloutSamples round = rollout_round(rows, iteration, rounds, m, sums, max_response_len);
    ++rounds;
    for (size_t g = 0; g * G < round.size() && kept_groups < local_prompts; ++g) {
      bool all_equal = true;
      for (size_t k = 1; k < G; ++k) all_equal &= round.scores[g * G + k] == round.scores[g * G];
      if (cfg_.dynamic_sampling && all_equal) continue;  // no learning signal in this group
      kept.append(round, g * G, G);
      ++kept_groups;
    }
    m.kept_groups = dp_sum(at::full({1}, double(kept_groups), at::kDouble)).item<double>();
    if (!cfg_.dynamic_sampling) break;
    if (m.kept_groups >= double(cfg_.prompts) || rounds >= kMaxSamplingRounds) break;
  }
  // Metrics over every sample drawn (before dynamic-sampling filtering).
  at::Tensor maxlen = at::full({1}, max_response_len, at::kDouble);
  if (policy_.ctx.dp && policy_.ctx.dp->size() > 1) policy_.ctx.dp->all_reduce(maxlen, dist::ReduceOp::kMax);
  const auto tot = unpack<RolloutSums>(dp_sum(pack(sums)));
  const double n = std::max(1.0, tot.samples);
  m.reward_mean = tot.score / n;
  m.reward_std = std::sqrt(std::max(0.0, tot.score_squared / n - m.reward_mean * m.reward_mean));
  m.accuracy = tot.correct / n;
  m.response_len_mean = tot.response_tokens / n;
  m.response_len_max = maxlen.item<double>();
  m.tokens = tot.tokens;
  m.sampling_rounds = double(rounds);

  Experience e;
  const int32_t pad = std::max(0, policy_.tokenizer->pad_id());
  if (kept.size() == 0) {
    kept.prompt_ids.push_back({pad});  // an empty batch still needs a shape; its mask is all zero
    kept.response_ids.push_back({});
  }
  e.batch = make_token_batch(kept.prompt_ids, kept.response_ids, pad, policy_.ctx.sp_size(), policy_.device());
  if (kept.size() == 0) {
    e.batch = slice_rows(e.batch, 0, 0);
    e.old_logp = e.batch.loss_mask.clone();
    e.scores = at::zeros({0}, e.batch.loss_mask.options());
    return e;
  }
  e.scores = at::tensor(std::vector<float>(kept.scores.begin(), kept.scores.end())).to(policy_.device());
  e.truncated = kept.truncated;
  const MicroBatchOptions micro = micro_batch_options(cfg_.train, policy_.ctx.sp_size());
  if (cfg_.recompute_old_logprobs)
    timed("old_logprob", m, [&] { e.old_logp = forward_logprobs(policy_, e.batch, micro, sampling_temperature(cfg_)); });
  else
    e.old_logp = scatter_response_values(e.batch, kept.logprobs);
  if (reference_) timed("ref_logprob", m, [&] { e.ref_logp = forward_logprobs(*reference_, e.batch, micro, sampling_temperature(cfg_)); });
  return e;
}

namespace {

// What the actor's mini-batch steps of one iteration add up (over the grad group after the last).
struct ActorUpdateSums {
  double clipped_tokens = 0;  // Σ clip fraction · tokens, per micro-batch
  double kl_tokens = 0;       // Σ KL · tokens
  double entropy_tokens = 0;  // Σ entropy · tokens
  double tokens = 0;
  double loss = 0;            // Σ micro-batch loss numerators / den
};

}  // namespace

void RlLoop::update(const Experience& exp, Trainer& trainer, const PolicyLossConfig& pl, int64_t iteration,
                    RlMetrics& m) {
  timed("actor_update", m, [&] {
    const int64_t B = exp.batch.rows();
    const int64_t n_mini = minibatches_per_epoch();
    const double grad_group = policy_.ctx.grad ? policy_.ctx.grad->size() : 1;
    at::Tensor keep = at::ones({B}, at::kFloat);
    if (cfg_.overlong.filter)
      for (int64_t i = 0; i < B; ++i)
        if (exp.truncated[i]) keep[i] = 0.0f;
    at::Tensor mask = exp.batch.loss_mask * keep.to(exp.batch.loss_mask.device()).unsqueeze(1);
    ActorUpdateSums sums;
    double norm_sum = 0;
    int64_t step = iteration * cfg_.epochs * n_mini;
    for (int64_t epoch = 0; epoch < cfg_.epochs; ++epoch) {
      for (int64_t k = 0; k < n_mini; ++k, ++step) {
        const int64_t lo = k * B / n_mini, hi = (k + 1) * B / n_mini;
        at::Tensor mk = mask.slice(0, lo, hi);
        double den_local = pl.agg == LossAgg::token_mean ? mk.sum().item<double>() : double(hi - lo);
        const double den = std::max(1.0, dp_sum(at::full({1}, den_local, at::kDouble)).item<double>());
        // Every per-token input in each micro-batch's layout (trimmed or packed), this sp rank's columns.
        struct Micro {
          TokenBatch tokens;
          at::Tensor old_logp, advantages, ref_logp, mask, weights;
        };
        const TokenBatch rows = slice_rows(exp.batch, lo, hi);
        const at::Tensor weights = loss_weights(mk, pl.agg);  // on whole rows, before any cut
        std::vector<Micro> micros;
        for (const MicroBatch& mb : plan_micro_batches(rows, micro_batch_options(cfg_.train, policy_.ctx.sp_size()))) {
          auto cut = [&](const at::Tensor& t) {
            return mb.gather_chunk(t.defined() ? t.slice(0, lo, hi) : t, policy_.ctx.sp);
          };
          micros.push_back({sequence_shard(mb.tokens, policy_.ctx.sp_rank(), policy_.ctx.sp_size()), cut(exp.old_logp),
                            cut(exp.advantages), cut(exp.ref_logp), cut(mask), mb.gather_chunk(weights, policy_.ctx.sp)});
        }
        // The per-micro-batch loss and statistics, from the policy's final hidden states.
        auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
          const Micro& u = micros[i];
          auto lp = policy_.model->token_logprobs(hidden / sampling_temperature(cfg_), u.tokens.targets,
                                                  /*with_entropy=*/true);
          PolicyLossInputs in{lp.logprobs, u.old_logp, u.advantages, u.mask, u.ref_logp, lp.entropy};
          PolicyLossOutput po = policy_loss(in, pl);
          at::Tensor loss = (po.per_token * u.weights).sum() * (grad_group / den);
          const double tok = u.mask.sum().item<double>();
          sums.clipped_tokens += po.clip_frac * tok;
          sums.kl_tokens += po.kl * tok;
          sums.entropy_tokens += po.entropy * tok;
          sums.tokens += tok;
          sums.loss += loss.item<double>() / grad_group;
          return loss;
        };
        std::vector<TokenBatch> shards;
        for (const Micro& u : micros) shards.push_back(u.tokens);
        // With pp only the last stage computes the loss and the statistics (shared over pp below).
        forward_backward(policy_, trainer, shards, micro_loss);
        norm_sum += trainer.finish_step(name_, step, env_.world->rank());
      }
    }
    at::Tensor packed = pack(sums);
    share_from_last_stage(policy_, packed);
    if (policy_.ctx.grad && policy_.ctx.grad->size() > 1) policy_.ctx.grad->all_reduce(packed);
    const auto tot = unpack<ActorUpdateSums>(packed);
    const double tok = std::max(1.0, tot.tokens);
    m.clip_frac = tot.clipped_tokens / tok;
    m.kl = tot.kl_tokens / tok;
    m.entropy = tot.entropy_tokens / tok;
    m.loss = tot.loss / double(cfg_.epochs * n_mini);
    m.grad_norm = norm_sum / double(cfg_.epochs * n_mini);
  });
}

void RlLoop::evaluate(int64_t step, StageResult& result) {
  if (data_.eval.size() == 0) return;
  auto r = algo::evaluate(policy_, data_.eval, *prompts_, rewards_.verifier(), eval_options(*env_.pipeline));
  result.eval_accuracy = r.accuracy;
  result.eval_loss = r.loss;
  spdlog::info("{} iteration {}: eval accuracy {:.3f}, loss {:.4f} ({} examples, {:.1f}s)", name_, step, r.accuracy,
               r.loss, r.examples, r.seconds);
  if (env_.metrics)
    env_.metrics->write(name_, env_.stage_index, step,
                        {{"eval/accuracy", r.accuracy}, {"eval/loss", r.loss},
                         {"eval/response_len", r.response_len}, {"seconds/eval", r.seconds}});
}

void RlLoop::write_metrics(int64_t step, const RlMetrics& m, double lr) {
  if (!env_.metrics) return;
  trace::Metrics out{{"loss", m.loss},
                     {"lr", lr},
                     {"grad_norm", m.grad_norm},
                     {"tokens_per_s", m.tokens / std::max(1e-9, m.seconds)},
                     {"reward/mean", m.reward_mean},
                     {"reward/std", m.reward_std},
                     {"accuracy", m.accuracy},
                     {"kl", m.kl},
                     {"entropy", m.entropy},
                     {"clip_frac", m.clip_frac},
                     {"response_len/mean", m.response_len_mean},
                     {"response_len/max", m.response_len_max},
                     {"seconds/iteration", m.seconds}};
  if (cfg_.dynamic_sampling) {
    out.emplace_back("dynamic_sampling/kept_groups", m.kept_groups);
    out.emplace_back("dynamic_sampling/rounds", m.sampling_rounds);
  }
  for (const auto& [k, v] : m.seconds_by_span) out.emplace_back("seconds/" + k, v);
  for (const auto& kv : m.extra) out.push_back(kv);
  env_.metrics->write(name_, env_.stage_index, step, out);
}

StageLoop RlLoop::stage_loop(int64_t start, const std::vector<TrainedRole>& saved, StageResult& result) {
  StageLoop steps;
  steps.name = name_;
  steps.unit = "iter";
  steps.start = start;
  steps.total = cfg_.iterations;
  steps.eval_every = cfg_.eval_every;
  steps.stop_at_accuracy = cfg_.stop_at_accuracy;
  steps.evaluate = [this, &result](int64_t it) { evaluate(it, result); };
  steps.checkpoint = [this, &saved](int64_t it) { checkpoint(it, saved); };
  return steps;
}

double sampling_temperature(const config::RlStage& cfg) {
  return cfg.sampling.temperature > 0 ? cfg.sampling.temperature : 1.0;
}

PolicyLossConfig policy_loss_config(const config::RlStage& cfg) {
  PolicyLossConfig pl;
  pl.clip_low = cfg.clip_low;
  pl.clip_high = cfg.clip_high;
  pl.agg = cfg.loss_agg;
  pl.kl_coef = cfg.kl.in_reward ? 0.0 : cfg.kl.coef;
  pl.kl_estimator = cfg.kl.estimator;
  pl.entropy_coef = cfg.entropy_coef;
  return pl;
}

}  // namespace hpcrl::algo
