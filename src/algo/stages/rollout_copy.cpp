// The pp = 1 copy a pipelined role generates with (see rollout_copy.h).
#include "hpcrl/algo/stages/rollout_copy.h"

#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

std::shared_ptr<model::DecoderModel> sync_rollout_model(Role& role) {
  if (role.ctx.pp_size() == 1) return role.model;
  trace::ScopedSpan span("weight_sync");
  if (!role.rollout_copy) {
    role.rollout_copy = model::make_whole_copy(*role.model);
    spdlog::info("role {}: generation runs on a pp=1 copy of the pipelined model", role.name);
  }
  model::sync_whole_copy(*role.model, *role.rollout_copy, "the current weights of role " + role.name);
  return role.rollout_copy;
}

rollout::EngineOptions rollout_engine_options(const Role& role, int64_t slots) {
  rollout::EngineOptions options{slots, true};
  if (!role.config) return options;  // a role outside a pipeline (hpcrl eval, score): the default steps
  switch (role.config->rollout.decode_step) {
    case config::DecodeStep::dynamic: options.decode_step = rollout::DecodeStep::dynamic; break;
    case config::DecodeStep::fixed: options.decode_step = rollout::DecodeStep::fixed; break;
    case config::DecodeStep::graphs: options.decode_step = rollout::DecodeStep::graphs; break;
  }
  return options;
}

}  // namespace hpcrl::algo
