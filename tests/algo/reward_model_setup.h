// What the reward-model tests share: a one-stage GRPO pipeline with a policy
// and a value-head role `rm` behind `rewards.rm` (YAML text, validated for this
// world size), its roles built the way `hpcrl run` builds them (runner::Roles,
// collective over the world), a StageEnv over them, random token-id samples,
// and a single-rank copy of a reward role to compute the expected scores.
#pragma once

#include <gtest/gtest.h>
#include <torch/utils.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/algo/objectives/reward_model.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/runner/role_builder.h"

namespace hpcrl::testing {

// The pipeline's `models:` entries for `policy` and `rm` are given; the rest is fixed.
// `rewards.rm` is on line 6 of the text; its value starts at column 7.
inline std::string rm_pipeline_yaml(const std::string& policy, const std::string& rm,
                                    const std::string& placement = "") {
  return "run: {name: rm-test, seed: 5}\n"
         "models:\n"
         "  policy: " + policy + "\n"
         "  rm: " + rm + "\n"
         "rewards:\n"
         "  rm: {type: model, model: rm}\n"
         "  math: {type: verifiable}\n"
         "data:\n"
         "  arith: {synthetic: {task: arithmetic, digits: 2, train: 64, eval: 8}}\n" +
         placement +
         "stages:\n"
         "  - grpo: {policy: policy, reward: [math, rm], data: arith, iterations: 1, prompts: 4, group: 2}\n";
}
inline const char* kRewardPos = "rm.yaml:6:7: rewards.rm: ";

// The pipeline's roles, by name; it has no datasets the tests read.
struct RmInputs : algo::StageInputs {
  runner::Roles* roles = nullptr;
  algo::Role& role(const std::string& n) override { return roles->get(n); }
  algo::Role* rollout_role(const std::string& n) override { return roles->rollout_of(n); }
  const algo::DataSplits& data(const std::string& n) override {
    throw std::logic_error("the reward-model tests read no dataset (" + n + ")");
  }
};

struct RmPipeline {
  config::PipelineConfig cfg;
  std::unique_ptr<runner::Roles> roles;
  RmInputs inputs;
  algo::StageEnv env;

  algo::Role& policy() { return roles->get("policy"); }
  algo::Role& rm() { return roles->get("rm"); }
  // The generation copy of a policy that generates on ranks of its own.
  algo::Role& generator() { return *roles->rollout_of("policy"); }
  algo::RewardFunction rewards(const std::vector<std::string>& names, int64_t micro_batch = 0) {
    return algo::RewardFunction(env, names, policy(), micro_batch, "grpo");
  }
};

// Validates the YAML for the current world size and builds its roles (collective).
inline std::unique_ptr<RmPipeline> make_rm_pipeline(const std::string& yaml) {
  const auto& w = dist::init(nullptr, nullptr);
  auto loaded = config::check_pipeline_text(yaml, "rm.yaml", {}, {w.size, false});
  std::string errors;
  for (const auto& e : loaded.diagnostics.errors) errors += e.str() + "\n";
  if (!loaded.ok()) ADD_FAILURE() << "the test pipeline does not validate:\n" << errors << yaml;
  auto p = std::make_unique<RmPipeline>();
  p->cfg = std::move(loaded.config);
  p->roles = std::make_unique<runner::Roles>(p->cfg, w.rank, w.size);
  p->roles->snapshot_for(p->cfg.stages.front());
  p->env.pipeline = &p->cfg;
  p->env.stage = &p->cfg.stages.front();
  p->env.world = dist::world_comm();
  p->inputs.roles = p->roles.get();
  p->env.inputs = &p->inputs;
  return p;
}

// The InputError message `fn` throws ("" when it throws none).
template <class Fn>
std::string input_error(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// `n` samples of ids < vocab: prompts of 3..10 tokens, responses of 1..20, the
// last response token EOS (257 in the byte vocabulary) for every other sample.
struct Samples {
  std::vector<std::vector<int32_t>> prompts, responses;
  std::vector<algo::SampleIds> ids() const {
    std::vector<algo::SampleIds> out;
    for (size_t i = 0; i < prompts.size(); ++i) out.push_back({&prompts[i], &responses[i]});
    return out;
  }
};
inline Samples random_samples(int n, uint64_t seed, int64_t vocab = 272) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto draw = [&](int64_t lo, int64_t hi) { return at::randint(lo, hi, {1}, gen, at::kLong).item<int64_t>(); };
  Samples s;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(draw(3, 11)), r(draw(1, 21));
    for (auto& t : p) t = int32_t(draw(0, 256));
    for (auto& t : r) t = int32_t(draw(0, vocab));
    if (i % 2 == 0) r.back() = 257;
    s.prompts.push_back(p);
    s.responses.push_back(r);
  }
  return s;
}

// A whole single-rank copy of a value-head role (collective over its groups: every rank gathers).
inline std::shared_ptr<model::DecoderModel> single_rank_copy(algo::Role& role) {
  io::NamedTensors full = model::gather_full_weights(*role.model);
  model::ModelOptions opts;
  opts.lm_head = false;
  opts.value_head = true;
  opts.init = false;
  auto m = std::make_shared<model::DecoderModel>(role.model->arch(), parallel::ParallelContext{}, opts);
  std::map<std::string, at::Tensor> weights(full.begin(), full.end());
  model::load_weights(*m, weights, "gathered " + role.name);
  return m;
}

// The value at the last token of prompt + response, by a forward of that sequence alone.
inline double value_alone(model::DecoderModel& m, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& response) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), response.begin(), response.end());
  at::Tensor ids = at::tensor(seq, at::kLong).unsqueeze(0);           // [1, L]
  at::Tensor v = m.values(m.forward(ids).hidden);                      // [1, L]
  return v[0][int64_t(seq.size()) - 1].item<double>();
}

}  // namespace hpcrl::testing
