// The optimizer phase of a training step over a real model's parameter list
// (gradient norm, clipping, AdamW update, zeroing), per kernel: one op per
// tensor (what ran before on a GPU), LibTorch's _foreach ops, and its fused
// AdamW where this LibTorch has it. On a GPU each op is a host dispatch and a
// launch, so the per-tensor step of a small model is bound by the host (an SFT
// step of the quickstart's model spent 6.2 of 23.4 ms here on an H200); on the
// CPU the per-tensor pass is the memory-bound vectorised one and stays the
// default. Rounds alternate the kernels so all see the same load; medians, and
// each kernel's ratio to the per-tensor one measured in the same run.
//   OMP_NUM_THREADS=1 build/benchmarks/train/bench_optimizer_step [--model preset:tiny] [--device cpu|cuda]
//                                                                  [--rounds 50]
#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_timing.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/adamw_multi_tensor.h"
#include "hpcrl/optim/grad_clip.h"

using namespace hpcrl;

namespace {

struct Kernel {
  optim::AdamWKernel kernel;
  bool multi_tensor_norm;
  const char* name;
};

// One optimizer phase as Trainer::finish_step runs it, timed to the device's end (the norm's
// read-back and a final .item() wait for the queued work).
double one_step(optim::AdamW& opt, optim::ParamSet& ps, const Kernel& k) {
  const parallel::ParallelContext ctx;
  for (auto& p : ps) p.tensor.mutable_grad().normal_();  // fresh gradients, outside the clock
  ps.front().tensor.grad().sum().item<float>();
  const auto t0 = bench::Clock::now();
  const double norm = k.multi_tensor_norm ? optim::global_grad_norm_multi_tensor(ps, ctx)
                                          : optim::global_grad_norm_per_tensor(ps, ctx);
  const double scale = optim::clip_coefficient(norm, 1.0);
  if (scale != 1.0)
    for (auto& p : ps) p.tensor.mutable_grad().mul_(scale);
  opt.step(1e-4);
  opt.zero_grad();
  ps.back().tensor.sum().item<float>();
  return bench::since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "preset:tiny", device = "cpu";
  int rounds = 50;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) spec = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_optimizer_step [--model preset:tiny] [--device cpu|cuda] [--rounds 50]\n");
      return 2;
    }
  }
  torch::NoGradGuard no_grad;
  auto model = model::load_model(spec, parallel::ParallelContext{});
  model->to(at::Device(device));
  std::vector<Kernel> kernels{{optim::AdamWKernel::kPerTensor, false, "per-tensor"},
                              {optim::AdamWKernel::kMultiTensor, true, "multi-tensor"}};
  if (optim::has_fused_adamw()) kernels.push_back({optim::AdamWKernel::kFused, true, "fused"});
  std::vector<optim::ParamSet> sets;
  std::vector<std::unique_ptr<optim::AdamW>> opts;
  int64_t elements = 0;
  for (const auto& k : kernels) {  // a copy of the weights per kernel, so each one's state is its own
    optim::ParamSet ps;
    for (const auto& p : model->named_parameters()) {
      at::Tensor t = p.value().detach().clone().requires_grad_(true);
      t.mutable_grad() = at::zeros_like(t);
      ps.push_back({p.key(), t, optim::Sharding::kReplicated});
    }
    sets.push_back(ps);
    opts.push_back(std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{1e-4, 0.9, 0.95, 1e-8, 0.1}));
    opts.back()->set_kernel(k.kernel);
  }
  for (const auto& p : sets.front()) elements += p.tensor.numel();
  std::vector<std::vector<double>> seconds(kernels.size());
  for (int r = 0; r < rounds + 2; ++r)
    for (size_t k = 0; k < kernels.size(); ++k) {
      const double s = one_step(*opts[k], sets[k], kernels[k]);
      if (r >= 2) seconds[k].push_back(s);  // two warm-up rounds
    }
  std::printf("optimizer step of %s on %s: %zu tensors, %lld parameters, medians of %d\n", spec.c_str(),
              device.c_str(), sets.front().size(), static_cast<long long>(elements), rounds);
  const double base = bench::median(seconds.front());
  for (size_t k = 0; k < kernels.size(); ++k) {
    const double m = bench::median(seconds[k]);
    std::printf("  %-12s %8.3f ms  %5.2fx the per-tensor time\n", kernels[k].name, m * 1e3, m / base);
  }
  return 0;
}
