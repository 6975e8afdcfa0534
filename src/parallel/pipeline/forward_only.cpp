// Forward-only pipelining (forward_only.h). The results are broadcast one
// micro-batch at a time from the rank holding the last chunk (pp rank pp - 1):
// receivers allocate each from result_buffer, so no shapes travel.
#include "hpcrl/parallel/pipeline/forward_only.h"

#include <torch/utils.h>

#include <memory>

#include "hpcrl/parallel/pipeline/p2p.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::pipeline {

std::vector<at::Tensor> run_forward_only(const dist::CommPtr& pp, const ForwardOnlyStep& step, int microbatches,
                                         Schedule schedule, int virtual_stages) {
  HPCRL_CHECK(step.forward && step.activation_buffer && step.result_buffer,
              "ForwardOnlyStep needs forward, activation_buffer and result_buffer callbacks");
  at::NoGradGuard no_grad;
  const int P = pp ? pp->size() : 1, rank = pp ? pp->rank() : 0;
  const int v = virtual_stages, chunks = P * v;
  HPCRL_CHECK_INPUT(v == 1 || P > 1, "virtual pipeline stages need pp > 1 (got " << v << " virtual stages, pp=1)");
  const std::vector<Action> actions = forward_actions(schedule, microbatches, P, rank, v);
  std::unique_ptr<StageLink> link = P > 1 ? std::make_unique<StageLink>(pp, chunks) : nullptr;
  const int lane = trace::pipeline_lane(rank);

  std::vector<at::Tensor> results(microbatches);
  for (const Action& a : actions) {
    at::Tensor input;
    if (a.chunk > 0) {
      input = step.activation_buffer(a.microbatch);
      link->recv_forward(input, a.microbatch, a.chunk);
    }
    at::Tensor out;
    {
      trace::ScopedSpan span("pp/forward",
                             {{"microbatch", double(a.microbatch)}, {"stage", double(rank)}, {"chunk", double(a.chunk)}},
                             lane);
      out = step.forward(a.microbatch, a.chunk, input);
    }
    HPCRL_CHECK(out.defined(), "chunk " << a.chunk << "'s forward returned nothing for micro-batch " << a.microbatch);
    if (a.chunk == chunks - 1)
      results[a.microbatch] = out.contiguous();
    else
      link->send_forward(out, a.microbatch, a.chunk);  // released once sent
  }
  if (link) link->wait_sends();
  if (P == 1) return results;

  trace::ScopedSpan span("pp/broadcast_results", {{"microbatches", double(microbatches)}}, lane);
  const int holder = (chunks - 1) % P;
  for (int i = 0; i < microbatches; ++i) {
    if (rank != holder) results[i] = step.result_buffer(i);
    HPCRL_CHECK(results[i].is_contiguous(), "result_buffer must return a contiguous tensor");
    pp->broadcast(results[i], holder);
  }
  return results;
}

}  // namespace hpcrl::parallel::pipeline
