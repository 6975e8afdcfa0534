// The pipelined training step (executor.h). Each forward keeps what its
// backward needs — the received input (a leaf that collects the input
// gradient), the output and the loss term — until that backward runs, so a
// schedule's memory is exactly the passes it has in flight. The step itself
// is a "pp/step" span carrying {stage, stages, microbatches, virtual_stages,
// theory} for the trace summary's bubble table.
#include "hpcrl/parallel/pipeline/executor.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "hpcrl/parallel/pipeline/p2p.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct InFlight {
  at::Tensor input;   // [B, T, C] leaf (undefined on chunk 0)
  at::Tensor output;  // graph output sent forward (undefined on the last chunk)
  at::Tensor loss;    // loss term of this pass (may be undefined)
};

trace::Args pass_args(const Action& a, int rank) {
  return {{"microbatch", double(a.microbatch)}, {"stage", double(rank)}, {"chunk", double(a.chunk)}};
}

// One stage's state through a step's actions.
struct StageRun {
  const PipelineStep& step;
  StageLink* link;  // null when pp = 1
  int rank, lane, chunks;
  PipelineStats stats;
  std::map<std::pair<int, int>, InFlight> in_flight;  // (microbatch, chunk)
  at::Tensor loss_sum;
};

// A forward pass: receive the chunk's input, run it, send its output on (or keep its loss), and keep
// what the backward needs.
void run_forward(StageRun& run, const Action& a) {
  const bool last = a.chunk == run.chunks - 1;
  InFlight f;
  if (a.chunk > 0) {
    f.input = run.step.activation_buffer(a.microbatch);
    run.link->recv_forward(f.input, a.microbatch, a.chunk);
    f.input.requires_grad_(true);
  }
  ChunkOutput out;
  {
    trace::ScopedSpan span("pp/forward", pass_args(a, run.rank), run.lane);
    const auto t = Clock::now();
    out = run.step.forward(a.microbatch, a.chunk, f.input);
    run.stats.compute_s += seconds_since(t);
  }
  if (last) {
    HPCRL_CHECK(out.loss.defined() && out.loss.numel() == 1,
                "the last chunk's forward must return the micro-batch's scalar loss");
  } else {
    HPCRL_CHECK(out.output.defined(), "chunk " << a.chunk << "'s forward returned no output activation");
    run.link->send_forward(out.output, a.microbatch, a.chunk);
    f.output = out.output;
  }
  if (out.loss.defined()) {
    at::Tensor l = out.loss.detach().to(at::kDouble).reshape({});
    run.loss_sum = run.loss_sum.defined() ? run.loss_sum + l : l;
    f.loss = out.loss;
  }
  run.in_flight.emplace(std::make_pair(a.microbatch, a.chunk), std::move(f));
}

// A backward pass: receive the output's gradient, run the backward of the kept forward, and send the
// input's gradient back.
void run_backward(StageRun& run, const Action& a) {
  const bool last = a.chunk == run.chunks - 1;
  auto it = run.in_flight.find({a.microbatch, a.chunk});
  HPCRL_CHECK(it != run.in_flight.end(), "schedule runs the backward of micro-batch "
                                             << a.microbatch << ", chunk " << a.chunk << " before its forward");
  InFlight f = std::move(it->second);
  run.in_flight.erase(it);
  std::vector<at::Tensor> outputs, grads;
  if (!last) {
    at::Tensor g = run.step.activation_buffer(a.microbatch);
    run.link->recv_backward(g, a.microbatch, a.chunk);
    if (f.output.requires_grad()) {
      outputs.push_back(f.output);
      grads.push_back(g);
    }
  }
  if (f.loss.defined() && f.loss.requires_grad()) {
    outputs.push_back(f.loss);
    grads.push_back(at::ones_like(f.loss));
  }
  if (run.step.before_backward) run.step.before_backward(a.microbatch, a.chunk);
  {
    trace::ScopedSpan span("pp/backward", pass_args(a, run.rank), run.lane);
    const auto t = Clock::now();
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
    run.stats.compute_s += seconds_since(t);
  }
  if (a.chunk > 0) {
    at::Tensor gi = f.input.grad();
    run.link->send_backward(gi.defined() ? gi : at::zeros_like(f.input), a.microbatch, a.chunk);
  }
}

}  // namespace

PipelineStats run_pipeline(const dist::CommPtr& pp, const PipelineStep& step, const PipelineOptions& options) {
  HPCRL_CHECK(step.forward && step.activation_buffer, "PipelineStep needs forward and activation_buffer callbacks");
  const int P = pp ? pp->size() : 1, rank = pp ? pp->rank() : 0;
  const int v = options.virtual_stages, chunks = P * v;
  HPCRL_CHECK_INPUT(v == 1 || P > 1, "virtual pipeline stages need pp > 1 (got " << v << " virtual stages, pp=1)");
  const std::vector<Action> actions = schedule_actions(options.schedule, options.microbatches, P, rank, v);
  std::unique_ptr<StageLink> link = P > 1 ? std::make_unique<StageLink>(pp, chunks) : nullptr;
  const int lane = trace::pipeline_lane(rank);

  StageRun run{step, link.get(), rank, lane, chunks, {}, {}, {}};
  const auto start = Clock::now();
  // The whole step on the stage's lane, with what the theory needs, so that
  // `hpcrl trace summarize` can put the measured bubble (the step's time
  // outside pp/forward and pp/backward) next to the schedule's.
  std::optional<trace::ScopedSpan> step_span;
  step_span.emplace("pp/step",
                    trace::Args{{"stage", double(rank)},
                                {"stages", double(P)},
                                {"microbatches", double(options.microbatches)},
                                {"virtual_stages", double(v)},
                                {"theory", theoretical_bubble(options.schedule, options.microbatches, P, v)}},
                    lane);
  for (const Action& a : actions) {
    if (a.kind == Action::kForward) run_forward(run, a);
    else run_backward(run, a);
  }
  HPCRL_CHECK(run.in_flight.empty(), run.in_flight.size() << " forward passes never ran their backward");
  if (link) link->wait_sends();
  PipelineStats stats = run.stats;
  stats.step_s = seconds_since(start);
  step_span.reset();

  // Every rank reports the step's loss: the sum of all stages' loss terms.
  at::Tensor total =
      run.loss_sum.defined() ? run.loss_sum.to(at::kCPU).reshape({1}) : at::zeros({1}, at::kDouble);
  dist::all_reduce(pp, total);
  stats.loss = total.item<double>();
  return stats;
}

}  // namespace hpcrl::parallel::pipeline
