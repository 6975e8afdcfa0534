// The pp = 1 copy a pipelined role generates with (see rollout_copy.h).
#include "hpcrl/algo/rollout_copy.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <map>

#include "hpcrl/model/weights.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

std::shared_ptr<model::DecoderModel> rollout_model(Role& role) {
  if (role.ctx.pp_size() == 1) return role.model;
  trace::ScopedSpan span("weight_sync");
  io::NamedTensors full = model::gather_full_weights(*role.model);
  if (!role.rollout_copy) {
    parallel::ParallelContext ctx = role.ctx;
    ctx.pp = nullptr;
    model::ModelOptions o = role.model->options();
    o.init = false;  // loaded right below
    o.activation_checkpointing = false;
    o.pp_layers.clear();
    o.pp_virtual_stages = 1;
    const at::Tensor p = role.model->parameters().front();
    role.rollout_copy = std::make_shared<model::DecoderModel>(role.model->arch(), ctx, o);
    role.rollout_copy->to(p.device(), p.scalar_type());
    spdlog::info("role {}: generation runs on a pp=1 copy of the pipelined model", role.name);
  }
  std::map<std::string, at::Tensor> weights(full.begin(), full.end());
  model::load_weights(*role.rollout_copy, weights, "the current weights of role " + role.name);
  role.rollout_copy->eval();
  return role.rollout_copy;
}

}  // namespace hpcrl::algo
