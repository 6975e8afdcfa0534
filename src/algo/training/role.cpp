// Role helpers (see role.h).
#include "hpcrl/algo/training/role.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

optim::ParamSet Role::param_set() const {
  optim::ParamSet out;
  auto specs = model->shard_specs();
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (!item.value().requires_grad()) continue;  // frozen under LoRA
    optim::Param p{name, item.value(), optim::Sharding::kReplicated};
    if (name.find(".experts.") != std::string::npos && ctx.ep_size() > 1) {
      p.sharding = optim::Sharding::kExpert;  // each ep rank holds different experts, whole
    } else if (auto it = specs.find(name); it != specs.end() && !it->second.whole()) {
      p.sharding = optim::Sharding::kTensor;
      p.replicas = ctx.tp_size() / it->second.chunks;
    }
    // Tied embeddings under pp: the first and the last stage both hold the
    // table (lookup and LM head) with the same, summed gradient; count it once.
    if (ctx.pp_size() > 1 && name == "model.embed_tokens.weight" && model->arch().tie_word_embeddings &&
        model->options().lm_head)
      p.replicas *= 2;
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<model::LoraSpec> Role::lora() const {
  if (!config || !config->lora.enabled()) return std::nullopt;
  const config::LoraConfig& c = config->lora;
  return model::LoraSpec{{c.rank, c.alpha, c.dropout}, c.targets};
}

at::Device Role::device() const {
  if (!member()) return at::kCPU;
  auto params = model->parameters();
  return params.empty() ? at::Device(at::kCPU) : params.front().device();
}

int64_t Role::local_batch(int64_t global, const std::string& what) const {
  const int dp = mesh.dp();
  HPCRL_CHECK_INPUT(global % dp == 0, what << " = " << global << " is not divisible by the data-parallel size " << dp
                                           << " of role '" << name << "'; make it a multiple of " << dp);
  return global / dp;
}

}  // namespace hpcrl::algo
