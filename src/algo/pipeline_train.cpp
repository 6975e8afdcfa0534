// Pipelined training steps (see pipeline_train.h).
#include "hpcrl/algo/pipeline_train.h"

#include <torch/torch.h>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

parallel::pipeline::Schedule pipeline_schedule(const Role& role) {
  using parallel::pipeline::Schedule;
  if (!role.config) return Schedule::kOneFOneB;
  switch (role.config->parallel.pp_schedule) {
    case config::PpSchedule::gpipe: return Schedule::kGpipe;
    case config::PpSchedule::interleaved: return Schedule::kInterleaved;
    case config::PpSchedule::_1f1b: break;
  }
  return Schedule::kOneFOneB;
}

parallel::pipeline::PipelineStats pipeline_forward_backward(Role& role, Trainer& trainer,
                                                            const std::vector<model::StageBatch>& mbs,
                                                            const LastStageLoss& loss,
                                                            const std::vector<double>& aux_weight) {
  model::DecoderModel& m = *role.model;
  const model::PipelineLayout& layout = m.pipeline_layout();
  HPCRL_CHECK(aux_weight.size() == mbs.size(), aux_weight.size() << " aux-loss weights for " << mbs.size()
                                                                 << " micro-batches");
  // The backward passes all run inside the schedule: no bucket may start its
  // dp all-reduce before the tied-embedding sum, so finish_step launches them all.
  trainer.begin_micro_batch(/*last=*/false);
  parallel::pipeline::PipelineStep step;
  step.forward = [&](int i, int chunk, const at::Tensor& input) {
    model::ForwardOutput out = model::forward_chunk(m, chunk, input, mbs[i]);
    at::Tensor aux;
    if (out.aux_loss.defined() && out.aux_loss.requires_grad()) aux = out.aux_loss * aux_weight[i];
    if (!layout.is_last_chunk(chunk)) return parallel::pipeline::ChunkOutput{out.hidden, aux};
    at::Tensor l = loss(i, out.hidden);
    return parallel::pipeline::ChunkOutput{{}, aux.defined() ? l + aux : l};
  };
  step.activation_buffer = [&](int i) { return model::activation_buffer(m, mbs[i].ids); };
  parallel::pipeline::PipelineOptions options;
  options.schedule = pipeline_schedule(role);
  options.microbatches = static_cast<int>(mbs.size());
  options.virtual_stages = layout.virtual_stages;
  parallel::pipeline::PipelineStats stats = parallel::pipeline::run_pipeline(role.ctx.pp, step, options);
  model::sync_tied_embedding_grad(m);
  return stats;
}

at::Tensor pipeline_logprobs(Role& role, const at::Tensor& ids, const at::Tensor& targets, int64_t micro_rows) {
  torch::NoGradGuard no_grad;
  const int64_t B = ids.size(0);
  const parallel::pipeline::Schedule schedule = pipeline_schedule(role);
  int64_t m = micro_rows > 0 ? (B + micro_rows - 1) / micro_rows : 1;
  if (schedule == parallel::pipeline::Schedule::kInterleaved) {
    const int64_t pp = role.ctx.pp_size();
    m = (m + pp - 1) / pp * pp;
  }
  const int64_t rows = (B + m - 1) / m;
  auto padded = [&](const at::Tensor& t) {
    if (rows * m == B) return t;
    return at::cat({t, t.narrow(0, B - 1, 1).expand({rows * m - B, t.size(1)})}, 0);
  };
  model::StageBatch batch{padded(ids), {}, {}};
  at::Tensor lp = model::pipelined_logprobs(*role.model, batch, padded(targets), static_cast<int>(m), schedule);
  return lp.narrow(0, 0, B);  // [B, Tl]
}

void share_from_last_stage(const Role& role, at::Tensor& values) {
  if (role.ctx.pp_size() == 1) return;
  if (!role.model->holds_last_chunk()) values.zero_();
  role.ctx.pp->all_reduce(values);
}

}  // namespace hpcrl::algo
