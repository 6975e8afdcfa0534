// Reward-model scoring (see reward_model.h): the stage-start checks that a
// value-head role can score the policy's samples where they are, and the
// batched no-grad forward that reads each row's value at its last token.
#include "hpcrl/algo/objectives/reward_model.h"

#include <torch/utils.h>

#include <algorithm>
#include <numeric>

#include "hpcrl/algo/objectives/remote_reward.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/algo/training/value_pass.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {

// "" when the two tokenizers map every id to the same token, else what differs.
std::string tokenizer_difference(const io::Tokenizer& a, const io::Tokenizer& b) {
  if (a.source() == b.source()) return "";  // the same file (or both the built-in byte tokenizer)
  if (a.vocab_size() != b.vocab_size())
    return std::to_string(a.vocab_size()) + " vs " + std::to_string(b.vocab_size()) + " token ids";
  for (int32_t id = 0; id < static_cast<int32_t>(a.vocab_size()); ++id)
    if (a.id_to_token(id) != b.id_to_token(id))
      return "token id " + std::to_string(id) + " is '" + a.id_to_token(id) + "' vs '" + b.id_to_token(id) + "'";
  if (a.eos_id() != b.eos_id()) return "EOS id " + std::to_string(a.eos_id()) + " vs " + std::to_string(b.eos_id());
  return "";
}

}  // namespace

std::vector<SampleIds> sample_ids(const std::vector<std::vector<int32_t>>& prompt_ids,
                                  const std::vector<rollout::Sample>& samples) {
  std::vector<SampleIds> out;
  out.reserve(samples.size());
  for (const auto& s : samples) out.push_back({&prompt_ids.at(s.prompt_index), &s.tokens});
  return out;
}

namespace {
// A pipelined reward role (pp > 1): the forward-only pipeline's per-token values
// (forward_values, the same [B, T] on every rank of the role), read at each row's last token.
std::vector<double> pipelined_last_token_values(Role& rm, const std::vector<SampleIds>& samples, int64_t micro_batch) {
  torch::NoGradGuard no_grad;
  std::vector<std::vector<int32_t>> prompts, responses;
  for (const SampleIds& s : samples) {
    prompts.push_back(*s.prompt);
    responses.push_back(s.response ? *s.response : std::vector<int32_t>{});
  }
  const int sp = rm.ctx.sp_size();
  const int32_t pad = rm.tokenizer ? std::max(0, rm.tokenizer->pad_id()) : 0;
  const TokenBatch b = make_token_batch(prompts, responses, pad, sp, rm.device());
  const at::Tensor v = forward_values(rm, b, MicroBatchOptions{micro_batch, 0, false, sp}).to(at::kCPU, at::kDouble);
  auto acc = v.accessor<double, 2>();
  std::vector<double> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i)  // right-padded: a row's last token sits at its length − 1
    out[i] = acc[int64_t(i)][int64_t(prompts[i].size() + responses[i].size()) - 1];
  return out;
}
}  // namespace

std::vector<double> last_token_values(Role& rm, const std::vector<SampleIds>& samples, int64_t micro_batch) {
  HPCRL_CHECK(rm.member(), "role " << rm.name << " cannot score here: it is not on this rank");
  if (!rm.model->is_whole()) return pipelined_last_token_values(rm, samples, micro_batch);  // head on the last stage
  HPCRL_CHECK(rm.model->score, "role " << rm.name << " cannot score: it has no value head");
  torch::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(samples.size());
  std::vector<double> out(samples.size());
  auto length = [&](int64_t i) {
    return samples[i].prompt->size() + (samples[i].response ? samples[i].response->size() : 0);
  };
  // Similar lengths share a micro-batch (less padding); scores do not depend on the grouping.
  std::vector<int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return length(a) < length(b); });
  const int64_t micro = micro_batch > 0 ? micro_batch : std::max<int64_t>(1, B);
  const int sp = rm.ctx.sp_size();
  const int32_t pad = rm.tokenizer ? std::max(0, rm.tokenizer->pad_id()) : 0;
  for (int64_t m = 0; m < B; m += micro) {
    const int64_t e = std::min(B, m + micro);
    std::vector<std::vector<int32_t>> prompts, responses;
    std::vector<int64_t> last;  // position of each row's last token
    for (int64_t k = m; k < e; ++k) {
      const SampleIds& s = samples[order[k]];
      prompts.push_back(*s.prompt);
      responses.push_back(s.response ? *s.response : std::vector<int32_t>{});
      last.push_back(static_cast<int64_t>(length(order[k])) - 1);
    }
    // [b, T] right-padded, T a multiple of sp; this rank runs its [b, T/sp] chunk.
    TokenBatch sb = sequence_shard(make_token_batch(prompts, responses, pad, sp, rm.device()), rm.ctx.sp_rank(), sp);
    at::Tensor v = rm.model->values(rm.model->forward(sb.ids, {}, sb.attention_mask).hidden);  // [b, T/sp] fp32
    // Each row's last token lies in one sp chunk: read it there, zeros elsewhere, summed over sp.
    const int64_t chunk = sb.ids.size(1), c0 = rm.ctx.sp_rank() * chunk;
    at::Tensor pos = at::tensor(last, at::kLong).to(v.device()) - c0;                     // [b]
    at::Tensor inside = pos.ge(0).logical_and(pos.lt(chunk));
    at::Tensor picked = v.gather(1, pos.clamp(0, chunk - 1).unsqueeze(1)).squeeze(1);    // [b]
    picked = at::where(inside, picked, at::zeros_like(picked)).contiguous();
    dist::all_reduce(rm.ctx.sp, picked);
    at::Tensor host = picked.to(at::kCPU, at::kDouble);
    auto acc = host.accessor<double, 1>();
    for (int64_t k = m; k < e; ++k) out[order[k]] = acc[k - m];
  }
  return out;
}

namespace {

// How the reward role's ranks sit against the generating role's: the same ranks, or none in common.
enum class RewardPlacement { kBeside, kApart, kPartly };

RewardPlacement placement_of(const dist::Mesh& rm, const dist::Mesh& gen) {
  if (rm.first_rank() == gen.first_rank() && rm.last_rank() == gen.last_rank()) return RewardPlacement::kBeside;
  if (rm.first_rank() > gen.last_rank() || rm.last_rank() < gen.first_rank()) return RewardPlacement::kApart;
  return RewardPlacement::kPartly;
}

// The tokenizer a role reads, loaded here on ranks outside it (checks run on every rank alike).
std::shared_ptr<io::Tokenizer> tokenizer_of(const Role& role) {
  if (role.tokenizer) return role.tokenizer;
  return std::shared_ptr<io::Tokenizer>(io::load_tokenizer(io::configured_tokenizer_spec(role.config->tokenizer)));
}

}  // namespace

RewardModel::RewardModel(StageEnv& env, const std::string& reward_name, const Role& generator, int64_t micro_batch,
                         const std::string& stage_name)
    : name_(reward_name), role_(env.role(env.pipeline->find_reward(reward_name)->model)), micro_batch_(micro_batch) {
  const config::PipelineConfig& pipeline = *env.pipeline;
  const std::string where = pipeline.pos("rewards." + reward_name).str() + ": rewards." + reward_name + ": ";
  // What the config alone decides: the same on every rank, so every rank stops here alike.
  HPCRL_CHECK_INPUT(role_.config->head == config::Head::value,
                    where << "role '" << role_.name << "' has head: " << config::to_string(role_.config->head)
                          << ", but a reward model needs a value head; give models." << role_.name << " head: value");
  HPCRL_CHECK(env.world, "a model reward needs the world communicator");
  switch (placement_of(role_.mesh, generator.mesh)) {
    case RewardPlacement::kBeside: check_beside(env, generator, where); break;
    case RewardPlacement::kApart:
      remote_ = std::make_unique<RemoteRewardModel>(role_, generator, env.world->size(), micro_batch, stage_name);
      break;
    case RewardPlacement::kPartly:
      HPCRL_CHECK_INPUT(false, where << "the reward model '" << role_.name << "' has ranks " << role_.mesh.first_rank() << "-"
                              << role_.mesh.last_rank() << " and the generating role '" << generator.name << "' "
                              << generator.mesh.first_rank() << "-" << generator.mesh.last_rank()
                              << "; give the reward model exactly the generating ranks or ranks of its own");
  }
  check_vocabulary(generator, where);
}

RewardModel::RewardModel(RewardModel&&) noexcept = default;
RewardModel::~RewardModel() = default;

void RewardModel::check_beside(StageEnv& env, const Role& generator, const std::string& where) {
  const std::string &rm = role_.name, &gen = generator.name;
  const int model_ranks = generator.mesh.tp() * generator.mesh.sp() * generator.mesh.pp();
  HPCRL_CHECK_INPUT(role_.mesh.dp() == generator.mesh.dp(),
                    where << "the reward model '" << rm << "' has dp = " << role_.mesh.dp() << " but the policy '" << gen
                          << "' has dp = " << generator.mesh.dp() << "; each rank scores the samples it generated, so "
                          << "their data-parallel sizes must match: give models." << rm << " tp·sp = "
                          << model_ranks << " (the policy's tp·sp·pp), e.g. parallel: {tp: " << model_ranks << "}");
  // Where each rank stands: [holds the reward model, its dp coordinate, the generator's (-1 outside it)].
  at::Tensor mine = at::tensor({int64_t(role_.member()), int64_t(role_.ctx.dp_rank()),
                                int64_t(generator.member() ? generator.ctx.dp_rank() : -1)}, at::kLong);
  at::Tensor all = env.world->all_gather(mine, 0);
  auto a = all.accessor<int64_t, 1>();
  for (int r = 0; r < env.world->size(); ++r)
    HPCRL_CHECK_INPUT(a[3 * r] == 1 || a[3 * r + 2] < 0,
                      where << "rank " << r << " does not hold the reward model '" << rm << "'; every rank scores "
                            << "the samples it generates, so the reward model must be on every generating rank "
                            << "(placement.mode: colocated, or give models." << rm << " the ranks of '" << gen
                            << "', or ranks of its own)");
  for (int r = 0; r < env.world->size(); ++r)
    HPCRL_CHECK_INPUT(a[3 * r + 2] < 0 || a[3 * r + 1] == a[3 * r + 2],
                      where << "rank " << r << " holds data-parallel replica " << a[3 * r + 2] << " of the policy '"
                            << gen << "' but replica " << a[3 * r + 1] << " of the reward model '" << rm
                            << "', so it would score samples it did not generate; the ranks of each reward-model "
                            << "replica must be those of one policy replica (a pipelined policy spreads its replicas "
                            << "over the pp stages: use a policy with pp: 1, or dp = 1)");
}

void RewardModel::check_vocabulary(const Role& generator, const std::string& where) {
  // From the configs (architectures are resolved on every rank) and tokenizers loaded where a role is absent.
  const std::string &rm = role_.name, &pol = generator.config->name;
  const int64_t v_rm = role_.config->arch->vocab_size, v_pol = generator.config->arch->vocab_size;
  const std::string fix = "a reward model scores the policy's token ids, so it must share the policy's tokenizer and "
                          "vocabulary: use a reward model trained from the policy's base model (e.g. models." + rm +
                          ": {init: {from: " + pol + "}, head: value}, then trained)";
  HPCRL_CHECK_INPUT(v_rm == v_pol, where << "the reward model '" << rm << "' has a vocabulary of " << v_rm
                                         << " tokens but the policy '" << pol << "' has " << v_pol << "; " << fix);
  const auto t_rm = tokenizer_of(role_), t_pol = tokenizer_of(generator);
  const std::string diff = tokenizer_difference(*t_rm, *t_pol);
  HPCRL_CHECK_INPUT(diff.empty(), where << "the reward model '" << rm << "' uses tokenizer " << t_rm->source()
                                        << " but the policy '" << pol << "' uses " << t_pol->source() << " (" << diff
                                        << "); " << fix << ", or set models." << rm << ".tokenizer to the policy's");
}

std::vector<double> RewardModel::score(const std::vector<SampleIds>& samples) {
  return remote_ ? remote_->score(samples) : last_token_values(role_, samples, micro_batch_);
}

void RewardModel::end_iteration() {
  if (remote_ && !role_.member()) remote_->end_iteration();
}

void RewardModel::serve_iteration() {
  if (remote_ && role_.member()) remote_->serve_iteration();
}

}  // namespace hpcrl::algo
