// The generating half of a GRPO/PPO iteration (rollout_producer.h).
#include "hpcrl/algo/stages/rollout_producer.h"

#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include <optional>

#include "hpcrl/algo/stages/rollout_copy.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/util/check.h"

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

RolloutProducer::RolloutProducer(const PolicyStageContext& stage, RewardFunction& rewards,
                                 const PromptBuilder* prompts, io::DataSampler& sampler,
                                 const tools::StageToolkit* tools)
    : stage_(stage), rewards_(rewards), prompts_(prompts), sampler_(sampler),
      generation_stops_(stage.env, stage.generator), tools_(tools) {
  if (!stage.plan.generates) return;
  // A pipelined generator samples from its pp = 1 copy, refreshed at each produce().
  auto model = sync_rollout_model(stage.generator);
  rollout::EngineOptions options = rollout_engine_options(stage.generator, stage.generator.config->rollout.max_batch);
  options.abandon = generation_stops_.engine_hook(*model, "rollout");
  engine_ = std::make_unique<rollout::Engine>(model, stage.generator.tokenizer.get(), options);
  if (stage.cfg.async.partial_rollouts) stream_ = std::make_unique<RolloutStream>(stage.cfg.group);
}

void RolloutProducer::rewind() {
  sampler_.restore(iteration_start_, stage_.name + "'s data position at the iteration's start");
}

GeneratorSnapshot RolloutProducer::snapshot() const {
  GeneratorSnapshot s;
  s.cursor = sampler_.cursor();
  if (stream_) s.groups = stream_->groups();
  return s;
}

void RolloutProducer::restore(GeneratorSnapshot snapshot, const std::string& where) {
  const char* fix = "; resume with the pipeline the run was started with";
  HPCRL_CHECK_INPUT(stream_ || snapshot.groups.empty(),
                    where << ": " << snapshot.groups.size() << " groups in flight saved for partial rollouts, but "
                          << stage_.env.stage->path << " has async.partial_rollouts off" << fix);
  for (const auto& g : snapshot.groups)
    HPCRL_CHECK_INPUT(int64_t(g.samples.size()) == stage_.cfg.group && g.versions.size() == g.samples.size(),
                      where << ": a saved group in flight has " << g.samples.size() << " samples and "
                            << g.versions.size() << " version lists, but " << stage_.env.stage->path << ".group is "
                            << stage_.cfg.group << fix);
  sampler_.restore(snapshot.cursor, where);
  if (stream_) stream_->restore(std::move(snapshot.groups));
}

// The rollout copy of a pipelined generator, or the generation copy in another layout, gets the updated weights.
void RolloutProducer::refresh_weights(RlMetrics& m) {
  Role& generator = stage_.generator;
  if (stage_.plan.pipeline_copy) timed_phase(stage_.name, "weight_sync", m, [&] { sync_rollout_model(generator); });
  if (stage_.plan.placement == GenerationPlacement::kResharded) {
    released_.restore(*generator.model);
    timed_phase(stage_.name, "weight_sync", m,
                [&] { rollout::reshard_weights(*stage_.policy.model, *generator.model); });
  }
}

// A resharded copy gives its storage back: the update and the log-probs use that memory.
void RolloutProducer::release_weights() {
  if (stage_.plan.placement == GenerationPlacement::kResharded) released_.release(*stage_.generator.model);
}

RolloutRound RolloutProducer::produce(int64_t iteration, int64_t version) {
  iteration_start_ = sampler_.cursor();
  RlMetrics m;  // the spans' seconds
  refresh_weights(m);
  RolloutRound round;
  Tally tally;
  round.kept = stream_ ? continue_groups(iteration, version, m, tally) : draw_groups(iteration, version, m, tally);
  rewards_.end_iteration();  // a reward model on ranks of its own stops answering for this iteration
  release_weights();
  // Metrics over every sample drawn (before dynamic-sampling filtering).
  at::Tensor maxlen = at::full({1}, tally.max_response_len, at::kDouble);
  dist::all_reduce(stage_.generator.ctx.dp, maxlen, dist::ReduceOp::kMax);
  round.totals = unpack<RolloutSums>(sum_over_dp(stage_.generator, pack(tally.sums)));
  round.max_response_len = maxlen.item<double>();
  round.kept_groups = m.kept_groups;
  round.rounds = m.sampling_rounds;
  round.dropped_stale = sum_over_dp(stage_.generator, tally.dropped_stale);
  round.seconds_by_span = m.seconds_by_span;
  return round;
}

bool RolloutProducer::uninformative(const RolloutSamples& round, size_t first) const {
  for (size_t k = 1; k < size_t(stage_.cfg.group); ++k)
    if (round.scores[first + k] != round.scores[first]) return false;
  return true;
}

bool RolloutProducer::enough_kept(int64_t kept_groups, int64_t rounds, double& kept_total) const {
  kept_total = sum_over_dp(stage_.generator, double(kept_groups));
  if (!stage_.cfg.dynamic_sampling) return true;
  return kept_total >= double(stage_.cfg.prompts) || rounds >= kMaxSamplingRounds;
}

RolloutSamples RolloutProducer::draw_groups(int64_t iteration, int64_t version, RlMetrics& m, Tally& tally) {
  const int64_t local_prompts = stage_.generator.local_batch(stage_.cfg.prompts, stage_.env.stage->path + ".prompts");
  const size_t G = static_cast<size_t>(stage_.cfg.group);
  RolloutSamples kept;
  int64_t kept_groups = 0, rounds = 0;
  while (true) {
    const auto rows = sampler_.next_batch(stage_.cfg.prompts, stage_.generator.ctx.dp_rank(), stage_.generator.mesh.dp());
    std::vector<std::vector<int32_t>> p_ids;
    for (size_t i : rows) p_ids.push_back(prompts_->prompt_ids(stage_.data.train[i]));
    const auto samples = generate(rows, p_ids, iteration, rounds, m, tally);
    RolloutSamples round = score(rows, p_ids, samples, iteration, m, tally);
    for (const auto& r : round.response_ids) round.versions.emplace_back(r.size(), int32_t(version));
    ++rounds;
    for (size_t g = 0; g * G < round.size() && kept_groups < local_prompts; ++g) {
      if (stage_.cfg.dynamic_sampling && uninformative(round, g * G)) continue;  // no learning signal
      kept.append(round, g * G, G);
      ++kept_groups;
    }
    if (enough_kept(kept_groups, rounds, m.kept_groups)) break;
  }
  m.sampling_rounds = double(rounds);
  return kept;
}

namespace {
void add_tool_totals(const tools::ToolCounts& totals, RolloutSums& sums) {
  sums.tool_calls += double(totals.calls);
  sums.tool_errors += double(totals.errors);
  sums.tool_seconds += totals.seconds;
}
}  // namespace

RolloutSamples RolloutProducer::continue_groups(int64_t iteration, int64_t version, RlMetrics& m, Tally& tally) {
  const int64_t local = stage_.generator.local_batch(stage_.cfg.prompts, stage_.env.stage->path + ".prompts");
  const size_t G = static_cast<size_t>(stage_.cfg.group);
  // Trained at update `iteration` at the earliest: a group already too stale then is not continued.
  tally.dropped_stale = double(stream_->drop_stale(iteration, stage_.cfg.async.max_staleness));
  RolloutSamples kept;
  int64_t kept_groups = 0, rounds = 0;
  while (true) {
    draw_ahead(local);
    const int64_t wanted = std::max<int64_t>(0, local - kept_groups);
    const int64_t more = wanted - std::min(wanted, stream_->complete());
    continue_samples(more, iteration, version, m, tally);  // an empty call when this replica has enough
    RolloutSamples round = score_groups(stream_->take_complete(wanted), iteration, m, tally);
    ++rounds;
    for (size_t g = 0; g * G < round.size(); ++g) {
      if (stage_.cfg.dynamic_sampling && uninformative(round, g * G)) continue;
      kept.append(round, g * G, G);
      ++kept_groups;
    }
    if (enough_kept(kept_groups, rounds, m.kept_groups)) break;
  }
  m.sampling_rounds = double(rounds);
  return kept;
}

void RolloutProducer::draw_ahead(int64_t local) {
  const Role& gen = stage_.generator;
  // Every replica draws as many batches as the one that needs the most, so their data positions agree.
  at::Tensor draws = at::full({1}, std::max<int64_t>(0, (2 * local - stream_->in_flight() + local - 1) / local),
                              at::kLong);
  dist::all_reduce(gen.ctx.dp, draws, dist::ReduceOp::kMax);
  for (int64_t d = 0; d < draws.item<int64_t>(); ++d) {
    const io::DataCursor at = sampler_.cursor();
    const auto rows = sampler_.next_batch(stage_.cfg.prompts, gen.ctx.dp_rank(), gen.mesh.dp());
    std::vector<std::vector<int32_t>> p_ids;
    std::vector<int64_t> keys;
    for (size_t j = 0; j < rows.size(); ++j) {
      p_ids.push_back(prompts_->prompt_ids(stage_.data.train[rows[j]]));
      keys.push_back(int64_t(at.epoch * at.size + at.index) + int64_t(gen.ctx.dp_rank()) * local + int64_t(j));
    }
    stream_->add(rows, p_ids, keys);
  }
}

void RolloutProducer::continue_samples(int64_t groups, int64_t iteration, int64_t version, RlMetrics& m,
                                       Tally& tally) {
  // A replica with its groups has nothing to generate, but an ep group's ranks step together: every rank of a
  // pausing call joins the pause check.
  RolloutStream::Call call;
  call.call.pause_after_groups = 1;
  if (groups > 0) call = stream_->next_call(groups);
  call.call.keep_paused_cache = stage_.cfg.async.keep_stale_cache;
  rollout::SamplingParams sampling = stage_sampling(stage_.cfg.sampling, prompts_->stop_ids());
  // One seed for the stage: a sample's draws are keyed by its prompt's draw position, whichever round continues it.
  sampling.seed = static_cast<uint64_t>(stage_.env.pipeline->run.seed) * 1000003u + 999983u;
  sampling.prompt_keys = call.keys;
  sampling.logprobs_at_temperature = true;
  rollout::GenerationResult result;
  std::optional<tools::ToolTurns> turns;  // a continued sample keeps its trajectory's name (its prompt's key)
  if (tools_) {
    turns.emplace(tools_->tools, tools_->format, tools_->limits, *stage_.generator.tokenizer, stage_.name + "/stream");
    turns->use_prompt_keys(call.keys);
    turns->use_episodes(episodes(call.examples));
    call.call.turns = &*turns;
  }
  timed_phase(stage_.name, "rollout", m, [&] {
    torch::NoGradGuard no_grad;
    stage_.generator.model->eval();
    result = engine_->run(call.prompts, call.call, sampling);
    stage_.generator.model->train();
    generation_stops_.check(stage_.name + " iteration " + std::to_string(iteration) + "'s rollout");
  });
  stream_->take(call, std::move(result), version);
  if (turns) add_tool_totals(turns->totals(), tally.sums);
}

RolloutSamples RolloutProducer::score_groups(std::vector<GroupInFlight> groups, int64_t iteration, RlMetrics& m,
                                             Tally& tally) {
  std::vector<size_t> rows;
  std::vector<std::vector<int32_t>> p_ids;
  std::vector<rollout::Sample> samples;
  for (size_t g = 0; g < groups.size(); ++g) {
    rows.push_back(groups[g].example);
    p_ids.push_back(std::move(groups[g].prompt_ids));
    for (auto& s : groups[g].samples) {
      s.prompt_index = int64_t(g);
      samples.push_back(std::move(s));
    }
  }
  RolloutSamples out = score(rows, p_ids, samples, iteration, m, tally);
  for (auto& g : groups)
    for (auto& v : g.versions) out.versions.push_back(std::move(v));
  return out;
}

std::vector<rollout::Sample> RolloutProducer::generate(const std::vector<size_t>& rows,
                                                   const std::vector<std::vector<int32_t>>& p_ids, int64_t iteration,
                                                   int64_t round, RlMetrics& m, Tally& tally) {
  rollout::SamplingParams sampling = stage_sampling(stage_.cfg.sampling, prompts_->stop_ids());
  sampling.seed = static_cast<uint64_t>(stage_.env.pipeline->run.seed) * 1000003u + static_cast<uint64_t>(iteration) * 101u +
                  static_cast<uint64_t>(round);
  sampling.prompt_offset = static_cast<int64_t>(stage_.generator.ctx.dp_rank() * p_ids.size());
  sampling.logprobs_at_temperature = true;
  std::vector<rollout::Sample> samples;
  timed_phase(stage_.name, "rollout", m, [&] {
    torch::NoGradGuard no_grad;
    stage_.generator.model->eval();
    samples = tools_ ? generate_with_tools(rows, p_ids, sampling,
                                           stage_.name + "/" + std::to_string(iteration) + "/" + std::to_string(round),
                                           tally)
                     : engine_->generate(p_ids, stage_.cfg.group, sampling);
    stage_.generator.model->train();
    // Every generating rank meets here, abandoned or not: the world learns of a stop.
    generation_stops_.check(stage_.name + " iteration " + std::to_string(iteration) + "'s rollout");
  });
  return samples;
}

std::vector<tools::EpisodeStart> RolloutProducer::episodes(const std::vector<size_t>& rows) const {
  std::vector<tools::EpisodeStart> out;
  for (size_t r : rows) out.push_back({stage_.data.train[r].prompt, stage_.data.train[r].answer});
  return out;
}

std::vector<rollout::Sample> RolloutProducer::generate_with_tools(const std::vector<size_t>& rows,
                                                                 const std::vector<std::vector<int32_t>>& p_ids,
                                                                 const rollout::SamplingParams& sampling,
                                                                 const std::string& name, Tally& tally) {
  tools::ToolTurns turns(tools_->tools, tools_->format, tools_->limits, *stage_.generator.tokenizer, name,
                         sampling.prompt_offset);
  turns.use_episodes(episodes(rows));
  auto samples =
      engine_->run(p_ids, rollout::GenerationCall::fresh(int64_t(p_ids.size()), stage_.cfg.group, &turns), sampling)
          .finished;
  add_tool_totals(turns.totals(), tally.sums);
  return samples;
}

RolloutSamples RolloutProducer::score(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& p_ids,
                                  const std::vector<rollout::Sample>& samples, int64_t iteration, RlMetrics& m,
                                  Tally& tally) {
  RolloutSums& sums = tally.sums;
  double& max_response_len = tally.max_response_len;
  RolloutSamples out;
  timed_phase(stage_.name, "reward", m, [&] {
    // Scored as one batch, so a command reward streams the whole round to its program.
    std::vector<std::string> texts;
    std::vector<nlohmann::json> meta;
    for (const auto& s : samples) {
      const auto& ex = stage_.data.train[rows[s.prompt_index]];
      texts.push_back(stage_.generator.tokenizer->decode(s.tokens, /*skip_special=*/true));
      meta.push_back({{"stage", stage_.name}, {"iteration", iteration}, {"example", rows[s.prompt_index]},
                      {"sample", s.sample_index}});
      if (ex.line > 0) meta.back()["line"] = ex.line;
    }
    std::vector<reward::RewardSample> batch;
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto& ex = stage_.data.train[rows[samples[k].prompt_index]];
      batch.push_back({ex.prompt, texts[k], ex.answer, &meta[k], samples[k].turn_reward});
    }
    const std::vector<ScoredResponse> scored = rewards_.score_batch(batch, sample_ids(p_ids, samples));
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto& s = samples[k];
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      const bool truncated = s.finish_reason == "length";
      const bool tool_failed = s.finish_reason == "tool_error";  // on_error: end scores the trajectory 0
      const double score =
          tool_failed ? 0.0
                      : scored[k].score -
                            overlong_penalty(stage_.cfg.overlong, stage_.cfg.sampling.max_new_tokens, len, truncated);
      out.prompt_ids.push_back(p_ids[s.prompt_index]);
      out.response_ids.push_back(s.tokens);
      out.logprobs.push_back(s.logprobs);
      out.sampled.push_back(s.sampled);
      if (tools_) {
        sums.tool_samples += 1;
        sums.reply_tokens += double(len - s.sampled_count());
      }
      out.example.push_back(rows[s.prompt_index]);
      out.scores.push_back(score);
      out.truncated.push_back(truncated);
      sums.score += score;
      sums.score_squared += score * score;
      sums.samples += 1;
      sums.correct += scored[k].correct && !tool_failed ? 1 : 0;
      sums.response_tokens += double(len);
      sums.tokens += double(len + p_ids[s.prompt_index].size());
      max_response_len = std::max(max_response_len, double(len));
    }
  });
  return out;
}

}  // namespace hpcrl::algo
