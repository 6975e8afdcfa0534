// MoE block forward (see the header and docs/moe.md). The (token, expert)
// pairs are sorted by global expert once; the dispatcher moves each pair's
// input row to the rank that holds the expert and brings the output back in
// the same sorted order, so the final weighted sum over a token's k experts
// is the same index_add whatever the ep size.
#include "hpcrl/model/moe_block.h"

#include <torch/utils.h>
#include <ATen/CPUGeneratorImpl.h>

#include "hpcrl/model/moe_router.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {
namespace {

constexpr double kInitStd = 0.02;  // HF initializer_range default

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Generator for one tensor group of the block: stream 0 router, 1 shared
// expert, 2 + e routed expert e. Independent of which rank holds what.
at::Generator stream_generator(uint64_t base_seed, uint64_t stream) {
  return at::detail::createCPUGenerator(splitmix64(base_seed ^ splitmix64(stream)));
}

parallel::expert::TokenDispatcher make_dispatcher(const ModelArch& arch, const parallel::ParallelContext& ctx) {
  HPCRL_CHECK_INPUT(arch.num_experts > 0, "MoE block needs num_experts > 0 (got " << arch.num_experts << ")");
  HPCRL_CHECK_INPUT(arch.experts_per_token >= 1 && arch.experts_per_token <= arch.num_experts,
                    "num_experts_per_tok = " << arch.experts_per_token << " must be in [1, num_experts = "
                                             << arch.num_experts << "]");
  HPCRL_CHECK_INPUT(arch.moe_intermediate_size > 0 && arch.hidden_size > 0,
                    "MoE block needs hidden_size > 0 and moe_intermediate_size > 0 (got "
                        << arch.hidden_size << ", " << arch.moe_intermediate_size << ")");
  HPCRL_CHECK_INPUT(arch.family != "mixtral" || arch.shared_expert_intermediate_size == 0,
                    "mixtral has no shared expert: set shared_expert_intermediate_size to 0");
  return parallel::expert::TokenDispatcher(ctx.ep, arch.num_experts);
}

}  // namespace

MoeBlock::MoeBlock(const ModelArch& arch, const parallel::ParallelContext& ctx)
    : hidden_(arch.hidden_size),
      num_experts_(arch.num_experts),
      top_k_(arch.experts_per_token),
      norm_topk_prob_(arch.norm_topk_prob),
      hf_name_(hf_module_name(arch)),
      dispatcher_(make_dispatcher(arch, ctx)) {
  gate = register_module("gate", std::make_shared<Projection>(hidden_, num_experts_));
  auto container = register_module("experts", std::make_shared<torch::nn::Module>());
  const ExpertProjNames names = expert_proj_names(arch.family);
  for (int64_t i = 0; i < dispatcher_.num_local_experts(); ++i) {
    auto expert = std::make_shared<ExpertMlp>(hidden_, arch.moe_intermediate_size, names);
    container->register_module(std::to_string(first_local_expert() + i), expert);
    experts_.push_back(expert);
  }
  if (arch.shared_expert_intermediate_size > 0) {
    shared_expert = register_module(
        "shared_expert",
        std::make_shared<ExpertMlp>(hidden_, arch.shared_expert_intermediate_size, expert_proj_names("qwen2_moe")));
    shared_expert_gate = register_module("shared_expert_gate", std::make_shared<Projection>(hidden_, 1));
  }
  reset_parameters();
}

void MoeBlock::reset_parameters() {
  torch::NoGradGuard no_grad;
  const uint64_t base = draw_init_seed();
  at::Generator g = stream_generator(base, 0);
  gate->weight.normal_(0.0, kInitStd, g);
  if (shared_expert) {
    at::Generator gs = stream_generator(base, 1);
    shared_expert->reset_parameters(gs, kInitStd);
    shared_expert_gate->weight.normal_(0.0, kInitStd, gs);
  }
  for (size_t i = 0; i < experts_.size(); ++i) {
    at::Generator ge = stream_generator(base, 2 + static_cast<uint64_t>(first_local_expert()) + i);
    experts_[i]->reset_parameters(ge, kInitStd);
  }
}

uint64_t MoeBlock::draw_init_seed() {
  // One draw from the global generator, the same on every rank that seeded it alike.
  return static_cast<uint64_t>(at::randint(int64_t{1} << 62, {1}, at::kLong).item<int64_t>());
}

std::string MoeBlock::hf_module_name(const ModelArch& arch) {
  return arch.family == "mixtral" ? "block_sparse_moe" : "mlp";
}

std::vector<MoeParameter> MoeBlock::hf_parameters() const {
  std::vector<MoeParameter> out;
  out.push_back({hf_name_ + ".gate.weight", gate->weight, -1});
  for (size_t i = 0; i < experts_.size(); ++i) {
    const int64_t e = first_local_expert() + static_cast<int64_t>(i);
    for (const auto& p : experts_[i]->named_parameters()) {
      out.push_back({hf_name_ + ".experts." + std::to_string(e) + "." + p.key(), p.value(), e});
    }
  }
  if (shared_expert) {
    for (const auto& p : shared_expert->named_parameters()) {
      out.push_back({hf_name_ + ".shared_expert." + p.key(), p.value(), -1});
    }
    out.push_back({hf_name_ + ".shared_expert_gate.weight", shared_expert_gate->weight, -1});
  }
  return out;
}

MoeOutput MoeBlock::forward(const at::Tensor& x, const at::Tensor& token_mask) {
  HPCRL_CHECK(x.dim() >= 1 && x.size(-1) == hidden_,
              "MoE input must be [..., " << hidden_ << "], got " << x.sizes());
  const at::Tensor xs = x.reshape({-1, hidden_});  // [N, C]
  const at::Tensor mask = token_mask.defined() ? token_mask.reshape({-1}) : token_mask;

  const Routing routing = route_top_k(gate->forward(xs), top_k_, norm_topk_prob_);
  MoeOutput out;
  out.aux_loss = load_balancing_loss(routing, num_experts_, mask);

  // (token, expert) pairs sorted by expert; pair i of the flattened [N, k] is token i / k.
  const at::Tensor flat = routing.experts.reshape({-1});                                     // [N·k]
  const at::Tensor order = std::get<1>(at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor token_of = order.div(top_k_, "floor");                                    // [N·k]
  out.expert_counts = at::bincount(flat, /*weights=*/{}, num_experts_);                     // [E]
  const at::Tensor rows = xs.index_select(0, token_of);                                      // [N·k, C]

  const parallel::expert::DispatchPlan plan = dispatcher_.plan(out.expert_counts);
  const at::Tensor expert_in = dispatcher_.dispatch(rows, plan);  // [R, C], grouped by local expert
  std::vector<at::Tensor> expert_out;
  int64_t offset = 0;
  for (size_t i = 0; i < experts_.size(); ++i) {
    // Experts with no rows still run (on [0, C]) so every rank has a gradient for
    // every parameter it holds, which keeps gradient all-reduces uniform.
    const int64_t n = plan.local_expert_counts[i];
    expert_out.push_back(experts_[i]->forward(expert_in.narrow(0, offset, n)));
    offset += n;
  }
  const at::Tensor back = dispatcher_.combine(at::cat(expert_out, 0), plan);  // [N·k, C], sorted order

  const at::Tensor w = routing.weights.reshape({-1}).index_select(0, order).to(xs.scalar_type());  // [N·k]
  at::Tensor y = at::zeros_like(xs).index_add(0, token_of, back * w.unsqueeze(1));                 // [N, C]
  if (shared_expert) {
    y = y + at::sigmoid(shared_expert_gate->forward(xs)) * shared_expert->forward(xs);
  }
  out.y = y.reshape(x.sizes());
  return out;
}

}  // namespace hpcrl::model
