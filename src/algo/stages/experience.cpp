// Collecting a GRPO/PPO iteration's experience (policy_stage.h): rounds of
// rollouts and rewards until enough groups are kept, then the kept samples'
// behaviour and reference log-probs.
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include "hpcrl/algo/objectives/logprob_mismatch.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/stages/policy_stage.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/stages/rollout_copy.h"
#include "hpcrl/algo/remote/sample_transfer.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/rollout/weight_sync.h"

namespace hpcrl::algo {

namespace {
constexpr int64_t kMaxSamplingRounds = 4;  // dynamic sampling: 1 + up to 3 refills

// DAPO's soft overlong punishment: a penalty ramping from 0 to `penalty` over
// the last `buffer` tokens before `limit` (buffer 0: all of it on truncation).
double overlong_penalty(const config::OverlongConfig& ol, int64_t limit, int64_t len, bool truncated) {
  if (ol.penalty <= 0) return 0;
  const int64_t start = limit - ol.buffer;
  if (ol.buffer > 0 && len > start) return ol.penalty * double(len - start) / double(ol.buffer);
  if (ol.buffer == 0 && truncated) return ol.penalty;
  return 0;
}
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

Experience PolicyStage::collect(int64_t iteration, RlMetrics& m) {
  RolloutRound round = produce(iteration);
  if (resharded()) round.kept = redeal_->redeal(round.kept);  // into the training layout's dp shares
  add_rollout_metrics(round, m);
  return experience_of(round.kept, iteration, /*staleness=*/0, m);
}

RolloutRound PolicyStage::produce(int64_t iteration) {
  iteration_start_ = sampler_->cursor();
  RlMetrics m;  // the spans' seconds
  // The rollout copy of a pipelined policy, or the generation copy in another layout, gets the updated weights.
  if (generator_.ctx.pp_size() > 1) timed("weight_sync", m, [&] { sync_rollout_model(generator_); });
  if (resharded()) {
    released_.restore(*generator_.model);
    timed("weight_sync", m, [&] { rollout::reshard_weights(*policy_.model, *generator_.model); });
  }
  RolloutRound round;
  RolloutSums sums;
  double max_response_len = 0, kept_groups = 0;
  round.kept = draw_groups(iteration, m, sums, max_response_len, kept_groups);
  rewards_.end_iteration();  // a reward model on ranks of its own stops answering for this iteration
  if (resharded()) released_.release(*generator_.model);  // the update and the log-probs use that memory
  // Metrics over every sample drawn (before dynamic-sampling filtering).
  at::Tensor maxlen = at::full({1}, max_response_len, at::kDouble);
  dist::all_reduce(generator_.ctx.dp, maxlen, dist::ReduceOp::kMax);
  round.totals = unpack<RolloutSums>(sum_over_dp(generator_, pack(sums)));
  round.max_response_len = maxlen.item<double>();
  round.kept_groups = kept_groups;
  round.rounds = m.sampling_rounds;
  round.seconds_by_span = m.seconds_by_span;
  return round;
}

void add_rollout_metrics(const RolloutRound& round, RlMetrics& m) {
  const RolloutSums& tot = round.totals;
  const double n = std::max(1.0, tot.samples);
  m.reward_mean = tot.score / n;
  m.reward_std = std::sqrt(std::max(0.0, tot.score_squared / n - m.reward_mean * m.reward_mean));
  m.accuracy = tot.correct / n;
  m.response_len_mean = tot.response_tokens / n;
  m.response_len_max = round.max_response_len;
  m.tokens = tot.tokens;
  m.kept_groups = round.kept_groups;
  m.sampling_rounds = round.rounds;
  for (const auto& [k, v] : round.seconds_by_span) m.seconds_by_span.emplace_back(k, v);
}

RolloutSamples PolicyStage::draw_groups(int64_t iteration, RlMetrics& m, RolloutSums& sums,
                                        double& max_response_len, double& kept_total) {
  const int64_t local_prompts = generator_.local_batch(cfg_.prompts, env_.stage->path + ".prompts");
  const size_t G = static_cast<size_t>(cfg_.group);
  RolloutSamples kept;
  int64_t kept_groups = 0, rounds = 0;
  while (true) {
    const auto rows = sampler_->next_batch(cfg_.prompts, generator_.ctx.dp_rank(), generator_.mesh.dp());
    std::vector<std::vector<int32_t>> p_ids;
    for (size_t i : rows) p_ids.push_back(prompts_->prompt_ids(data_.train[i]));
    const auto samples = generate(p_ids, iteration, rounds, m);
    RolloutSamples round = score(rows, p_ids, samples, iteration, m, sums, max_response_len);
    ++rounds;
    for (size_t g = 0; g * G < round.size() && kept_groups < local_prompts; ++g) {
      bool all_equal = true;
      for (size_t k = 1; k < G; ++k) all_equal &= round.scores[g * G + k] == round.scores[g * G];
      if (cfg_.dynamic_sampling && all_equal) continue;  // no learning signal in this group
      kept.append(round, g * G, G);
      ++kept_groups;
    }
    kept_total = sum_over_dp(generator_, double(kept_groups));
    if (!cfg_.dynamic_sampling) break;
    if (kept_total >= double(cfg_.prompts) || rounds >= kMaxSamplingRounds) break;
  }
  m.sampling_rounds = double(rounds);
  return kept;
}

std::vector<rollout::Sample> PolicyStage::generate(const std::vector<std::vector<int32_t>>& p_ids,
                                                   int64_t iteration, int64_t round, RlMetrics& m) {
  rollout::SamplingParams sampling = stage_sampling(cfg_.sampling, prompts_->stop_ids());
  sampling.seed = static_cast<uint64_t>(env_.pipeline->run.seed) * 1000003u + static_cast<uint64_t>(iteration) * 101u +
                  static_cast<uint64_t>(round);
  sampling.prompt_offset = static_cast<int64_t>(generator_.ctx.dp_rank() * p_ids.size());
  sampling.logprobs_at_temperature = true;
  std::vector<rollout::Sample> samples;
  timed("rollout", m, [&] {
    torch::NoGradGuard no_grad;
    generator_.model->eval();
    samples = engine_->generate(p_ids, cfg_.group, sampling);
    generator_.model->train();
    // Every generating rank meets here, abandoned or not: the world learns of a stop.
    generation_stops_.check(name_ + " iteration " + std::to_string(iteration) + "'s rollout");
  });
  return samples;
}

RolloutSamples PolicyStage::score(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                                  const std::vector<rollout::Sample>& samples, int64_t iteration, RlMetrics& m,
                                  RolloutSums& sums, double& max_response_len) {
  RolloutSamples out;
  timed("reward", m, [&] {
    // Scored as one batch, so a command reward streams the whole round to its program.
    std::vector<std::string> texts;
    std::vector<nlohmann::json> meta;
    for (const auto& s : samples) {
      const auto& ex = data_.train[rows[s.prompt_index]];
      texts.push_back(generator_.tokenizer->decode(s.tokens, /*skip_special=*/true));
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
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      const bool truncated = s.finish_reason == "length";
      const double score =
          scored[k].score - overlong_penalty(cfg_.overlong, cfg_.sampling.max_new_tokens, len, truncated);
      out.prompt_ids.push_back(p_ids[s.prompt_index]);
      out.response_ids.push_back(s.tokens);
      out.logprobs.push_back(s.logprobs);
      out.example.push_back(rows[s.prompt_index]);
      out.scores.push_back(score);
      out.truncated.push_back(truncated);
      sums.score += score;
      sums.score_squared += score * score;
      sums.samples += 1;
      sums.correct += scored[k].correct ? 1 : 0;
      sums.response_tokens += double(len);
      sums.tokens += double(len + p_ids[s.prompt_index].size());
      max_response_len = std::max(max_response_len, double(len));
    }
  });
  return out;
}

Experience PolicyStage::experience_of(RolloutSamples& kept, int64_t iteration, int64_t staleness, RlMetrics& m) {
  Experience e;
  const int32_t pad = std::max(0, policy_.tokenizer->pad_id());
  if (kept.size() == 0) {
    kept.prompt_ids.push_back({pad});  // an empty batch still needs a shape; its mask is all zero
    kept.response_ids.push_back({});
  }
  e.batch = make_token_batch(kept.prompt_ids, kept.response_ids, pad, policy_.ctx.sp_size(), policy_.device());
  if (kept.size() == 0) {
    e.batch = slice_rows(e.batch, 0, 0);
    if (remote_reference_) remote_reference_->logprobs(RolloutSamples(), e.batch);  // the reference still answers
    e.old_logp = e.batch.loss_mask.clone();
    e.scores = at::zeros({0}, e.batch.loss_mask.options());
    // No tokens here, but the dp group reduces the figures together.
    if (measures_mismatch(iteration, staleness)) add_mismatch_metrics(e.old_logp, e.old_logp, e.batch, m);
    return e;
  }
  e.scores = at::tensor(std::vector<float>(kept.scores.begin(), kept.scores.end())).to(policy_.device());
  e.truncated = kept.truncated;
  const MicroBatchOptions micro = micro_batch_options(cfg_.train, policy_.ctx.sp_size());
  const double temperature = sampling_temperature(cfg_);
  const at::Tensor engine_logp = scatter_response_values(e.batch, kept.logprobs);
  if (cfg_.recompute_old_logprobs)  // also whenever decoupled(), which requires it
    timed("old_logprob", m, [&] { e.old_logp = forward_logprobs(policy_, e.batch, micro, temperature); });
  else
    e.old_logp = engine_logp;
  if (cfg_.decoupled()) {
    e.behaviour_logp = engine_logp.to(e.old_logp.device());
    add_offpolicy_metrics(e, m);
  }
  if (measures_mismatch(iteration, staleness)) {
    at::Tensor trainer_logp = e.old_logp;  // the old-log-prob pass, where it ran
    if (!cfg_.recompute_old_logprobs)
      timed("mismatch_logprob", m, [&] { trainer_logp = forward_logprobs(policy_, e.batch, micro, temperature); });
    add_mismatch_metrics(trainer_logp, engine_logp, e.batch, m);
  }
  if (remote_reference_)
    timed("ref_logprob", m, [&] { e.ref_logp = remote_reference_->logprobs(kept, e.batch); });
  else if (reference_)
    timed("ref_logprob", m, [&] { e.ref_logp = forward_logprobs(*reference_, e.batch, micro, temperature); });
  return e;
}

bool PolicyStage::measures_mismatch(int64_t iteration, int64_t staleness) const {
  if (staleness != 0) return false;  // the engine sampled with older weights: a policy lag, not a kernel mismatch
  return cfg_.recompute_old_logprobs || mismatch_pass_due(iteration, cfg_.logprob_mismatch_every);
}

void PolicyStage::add_mismatch_metrics(const at::Tensor& trainer_logp, const at::Tensor& engine_logp,
                                       const TokenBatch& batch, RlMetrics& m) {
  double abs_max = 0;
  const MismatchSums local =
      mismatch_sums(trainer_logp, engine_logp.to(trainer_logp.device()), batch.loss_mask, abs_max);
  for (const auto& kv : mismatch_metrics(reduce_mismatch(local, abs_max, policy_.ctx.dp))) m.extra.push_back(kv);
}

namespace {
// The decoupled objective's importance weights over a batch's response tokens, summed over dp.
struct OffpolicySums {
  double weights = 0, capped = 0, kl = 0, tokens = 0;
};
}  // namespace

void PolicyStage::add_offpolicy_metrics(const Experience& e, RlMetrics& m) {
  const at::Tensor mask = e.batch.loss_mask.to(at::kDouble);
  const at::Tensor raw = importance_weights(e.old_logp, e.behaviour_logp, 0).to(at::kDouble) * mask;
  const at::Tensor kl = kl_estimate(e.behaviour_logp, e.old_logp, KlEstimator::k3).to(at::kDouble) * mask;
  OffpolicySums local;
  local.weights = raw.sum().item<double>();
  local.capped = cfg_.tis_cap > 0 ? ((raw > cfg_.tis_cap).to(at::kDouble) * mask).sum().item<double>() : 0;
  local.kl = kl.sum().item<double>();
  local.tokens = mask.sum().item<double>();
  const OffpolicySums tot = unpack<OffpolicySums>(sum_over_dp(policy_, pack(local)));
  at::Tensor w_max = at::full({1}, raw.numel() ? raw.max().item<double>() : 0.0, at::kDouble);
  dist::all_reduce(policy_.ctx.dp, w_max, dist::ReduceOp::kMax);
  const double tokens = std::max(1.0, tot.tokens);
  m.extra.emplace_back("offpolicy/iw_mean", tot.weights / tokens);
  m.extra.emplace_back("offpolicy/iw_max", w_max.item<double>());
  m.extra.emplace_back("offpolicy/iw_capped_share", tot.capped / tokens);
  m.extra.emplace_back("offpolicy/kl_behaviour_old", tot.kl / tokens);
}

}  // namespace hpcrl::algo
