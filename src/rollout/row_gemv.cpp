// One CPU row times one or more weight matrices (row_gemv.h).
#include "hpcrl/rollout/row_gemv.h"

#include <algorithm>

#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/util/check.h"
#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout {

bool row_gemv_applies(const at::Tensor& x, const at::Tensor& w) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && x.numel() == x.size(-1) &&
         w.device().is_cpu() && w.scalar_type() == at::kFloat && w.dim() == 2 && w.size(1) == x.size(-1) &&
         w.is_contiguous();
}

at::Tensor row_gemv(const at::Tensor& x, const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
                    const cpu::Kernels* kernels) {
  const cpu::Kernels& k = kernels ? *kernels : cpu::best_kernels();
  HPCRL_CHECK(!weights.empty() && (biases.empty() || biases.size() == weights.size()),
              "row_gemv of " << weights.size() << " weights with " << biases.size() << " biases");
  const int64_t K = x.size(-1);
  std::vector<int64_t> first{0};  // output offset of each weight's rows
  for (size_t i = 0; i < weights.size(); ++i) {
    HPCRL_CHECK(row_gemv_applies(x, weights[i]), "row_gemv: weight " << i << " " << weights[i].sizes()
                                                                      << " for an input of " << x.sizes());
    const at::Tensor* b = biases.empty() ? nullptr : &biases[i];
    HPCRL_CHECK(!b || !b->defined() || (b->is_contiguous() && b->scalar_type() == at::kFloat &&
                                        b->numel() == weights[i].size(0)),
                "row_gemv: bias " << i << " does not match its weight");
    first.push_back(first.back() + weights[i].size(0));
  }
  const at::Tensor xc = x.contiguous();
  auto shape = x.sizes().vec();
  shape.back() = first.back();
  at::Tensor y = at::empty(shape, x.options());
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Blocks of kGemvRows output rows over the weights concatenated; a chunk of
  // a thread reads at least ~256 KiB of weights, so small matrices stay on one.
  const int64_t rows = first.back(), blocks = (rows + cpu::kGemvRows - 1) / cpu::kGemvRows;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 18) / (cpu::kGemvRows * K * int64_t(sizeof(float))));
  parallel::host_parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * cpu::kGemvRows, r1 = std::min(rows, b1 * cpu::kGemvRows);
    for (size_t i = 0; i < weights.size(); ++i) {
      const int64_t lo = std::max(r0, first[i]) - first[i], hi = std::min(r1, first[i + 1]) - first[i];
      if (lo >= hi) continue;
      const at::Tensor* b = biases.empty() ? nullptr : &biases[i];
      k.gemv(weights[i].data_ptr<float>(), K, K, xp, b && b->defined() ? b->data_ptr<float>() : nullptr, lo, hi,
             yp + first[i]);
    }
  });
  return y;
}

}  // namespace hpcrl::rollout
