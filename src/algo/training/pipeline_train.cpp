// Pipelined training steps (see pipeline_train.h).
#include "hpcrl/algo/training/pipeline_train.h"

#include <torch/utils.h>

#include <map>

#include "hpcrl/parallel/pipeline/forward_only.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

parallel::pipeline::Schedule pipeline_schedule(const Role& role) {
  return role.config ? role.config->parallel.pp_schedule : parallel::pipeline::Schedule::_1f1b;
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
  // dp all-reduce before the tied-embedding sum, so finish_step launches them
  // all. ZeRO-2/3 reduce-scatter each backward's gradients as it runs; their
  // tied-embedding sum is over the reduced shards (Trainer::finish_step).
  trainer.begin_micro_batch(/*last=*/false);
  parallel::pipeline::PipelineStep step;
  if (trainer.reduces_during_backward())
    step.before_backward = [&](int, int) { trainer.begin_micro_batch(/*last=*/false); };
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
  if (!trainer.reduces_during_backward()) model::sync_tied_embedding_grad(m);
  return stats;
}

at::Tensor pipeline_forward_only(Role& role, const at::Tensor& ids, int64_t micro_rows, const LastStageOutput& head,
                                 at::IntArrayRef row_shape, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  model::DecoderModel& m = *role.model;
  const int64_t B = ids.size(0);
  HPCRL_CHECK(B > 0, "a forward-only pipeline pass needs at least one row");
  const parallel::pipeline::Schedule schedule = pipeline_schedule(role);
  int64_t mbs = micro_rows > 0 ? (B + micro_rows - 1) / micro_rows : 1;
  if (schedule == parallel::pipeline::Schedule::interleaved) {
    const int64_t pp = role.ctx.pp_size();
    mbs = (mbs + pp - 1) / pp * pp;
  }
  const int64_t rows = (B + mbs - 1) / mbs;
  // [rows · mbs] row indices into the batch, the padding repeating its last row.
  const at::Tensor index = at::arange(rows * mbs, ids.options().dtype(at::kLong)).clamp_max(B - 1);
  const at::Tensor padded = ids.index_select(0, index);  // [rows · mbs, Tl]
  auto rows_of = [&](const at::Tensor& t, int i) { return t.narrow(0, i * rows, rows); };

  parallel::pipeline::ForwardOnlyStep step;
  step.forward = [&](int i, int chunk, const at::Tensor& input) {
    model::ForwardOutput out = model::forward_chunk(m, chunk, input, {rows_of(padded, i), {}, {}});
    if (!m.pipeline_layout().is_last_chunk(chunk)) return out.hidden;
    return head(out.hidden, rows_of(index, i)).to(dtype);
  };
  step.activation_buffer = [&](int i) { return model::activation_buffer(m, rows_of(padded, i)); };
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  const at::TensorOptions result = at::TensorOptions().dtype(dtype).device(ids.device());
  step.result_buffer = [&](int) { return at::empty(shape, result); };
  const dist::CommPtr pp = role.ctx.pp_size() > 1 ? role.ctx.pp : nullptr;
  const int v = m.pipeline_layout().virtual_stages;
  std::vector<at::Tensor> parts = parallel::pipeline::run_forward_only(pp, step, static_cast<int>(mbs), schedule, v);
  return at::cat(parts, 0).narrow(0, 0, B);  // [B, row_shape...]
}

at::Tensor pipeline_logprobs(Role& role, const at::Tensor& ids, const at::Tensor& targets, int64_t micro_rows,
                             double temperature) {
  auto head = [&](const at::Tensor& hidden, const at::Tensor& rows) {
    return role.model->token_logprobs(hidden, targets.index_select(0, rows), /*with_entropy=*/false, temperature)
        .logprobs;
  };
  return pipeline_forward_only(role, ids, micro_rows, head, {ids.size(1)}, at::kFloat);  // [B, Tl]
}

void check_same_rows(const dist::CommPtr& world, const Role& owner, const Role& runner, const std::string& where) {
  at::Tensor mine = at::tensor({int64_t(owner.ctx.dp_rank()), int64_t(runner.ctx.dp_rank())}, at::kLong);
  at::Tensor all = dist::all_gather(world, mine);  // [2 · world]
  auto acc = all.accessor<int64_t, 1>();
  std::map<int64_t, int64_t> first;  // runner dp rank → the first world rank holding it
  for (int64_t r = 0; r < all.size(0) / 2; ++r) {
    const int64_t o = acc[2 * r], d = acc[2 * r + 1];
    const int64_t q = first.emplace(d, r).first->second;
    HPCRL_CHECK_INPUT(acc[2 * q] == o,
                      where << ": ranks " << q << " and " << r << " form one replica of role '" << runner.name
                            << "' (its data-parallel rank " << d << ") but hold different rows of role '"
                            << owner.name << "' (its data-parallel ranks " << acc[2 * q] << " and " << o
                            << "), which '" << runner.name << "' has to process together; give '" << runner.name
                            << "' (pp=" << runner.ctx.pp_size() << ") the same pp as '" << owner.name
                            << "' (pp=" << owner.ctx.pp_size() << "; pp is the outermost mesh dimension), or dp = 1");
  }
}

void share_from_last_stage(const Role& role, at::Tensor& values) {
  if (role.ctx.pp_size() == 1) return;
  if (!role.model->holds_last_chunk()) values.zero_();
  role.ctx.pp->all_reduce(values);
}

}  // namespace hpcrl::algo
