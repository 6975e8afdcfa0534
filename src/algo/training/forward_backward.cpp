// One step's forward and backward over its micro-batches (see forward_backward.h).
#include "hpcrl/algo/training/forward_backward.h"

#include <torch/utils.h>

#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

std::vector<double> aux_loss_weights_by_rows(const std::vector<MicroBatch>& plan, int64_t rank_rows) {
  std::vector<double> weights;
  for (const MicroBatch& mb : plan) weights.push_back(double(mb.end - mb.begin) / double(rank_rows));
  return weights;
}

namespace {

void pipelined_forward_backward(Role& role, Trainer& trainer, const std::vector<TokenBatch>& shards,
                                const MicroBatchLoss& loss, const std::vector<double>& aux_weight) {
  std::vector<model::StageBatch> stage_mbs;
  for (const TokenBatch& s : shards) stage_mbs.push_back(stage_batch(s));
  // Without weights the pipeline still needs one per micro-batch: 0 adds nothing.
  const std::vector<double> weights = aux_weight.empty() ? std::vector<double>(shards.size(), 0.0) : aux_weight;
  pipeline_forward_backward(
      role, trainer, stage_mbs, [&](int i, const at::Tensor& hidden) { return loss(size_t(i), hidden); }, weights);
}

}  // namespace

void forward_backward(Role& role, Trainer& trainer, const std::vector<TokenBatch>& shards,
                      const MicroBatchLoss& loss, const std::vector<double>& aux_weight) {
  HPCRL_CHECK(aux_weight.empty() || aux_weight.size() == shards.size(),
              aux_weight.size() << " aux-loss weights for " << shards.size() << " micro-batches");
  if (shards.empty()) {
    // Nothing to differentiate, but the gradient sync must still count this rank in.
    trainer.begin_micro_batch(/*last=*/true);
    return;
  }
  if (role.ctx.pp_size() > 1) return pipelined_forward_backward(role, trainer, shards, loss, aux_weight);
  for (size_t i = 0; i < shards.size(); ++i) {
    trainer.begin_micro_batch(i + 1 == shards.size());
    model::ForwardOutput out = forward_tokens(*role.model, shards[i]);
    at::Tensor l = loss(i, out.hidden);
    if (!aux_weight.empty() && out.aux_loss.defined()) l = l + out.aux_loss * aux_weight[i];
    l.backward();
  }
}

}  // namespace hpcrl::algo
