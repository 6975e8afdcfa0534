// One CPU row times one or more weight matrices (row_gemv.h).
#include "hpcrl/rollout/row_gemv.h"

#include <algorithm>

#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/util/check.h"
#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout {

bool row_gemv_applies(const at::Tensor& x, const at::Tensor& w) {
  const bool dtype = x.scalar_type() == w.scalar_type() &&
                     (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
  return dtype && x.device().is_cpu() && x.dim() >= 1 && x.numel() == x.size(-1) && w.device().is_cpu() &&
         w.dim() == 2 && w.size(1) == x.size(-1) && w.is_contiguous();
}

namespace {
// Rows [o0, o1) of w times x (float32 values) plus bias (float32, or null), by the kernel for w's dtype.
void gemv_rows_of(const cpu::Kernels& k, const at::Tensor& w, const float* x, const float* bias, int64_t o0,
                  int64_t o1, float* y) {
  const int64_t K = w.size(1);
  if (w.scalar_type() == at::kFloat)
    k.gemv(w.data_ptr<float>(), K, K, x, bias, o0, o1, y);
  else
    k.gemv_bf16(reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), K, K, x, bias, o0, o1, y);
}
}  // namespace

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
    HPCRL_CHECK(!b || !b->defined() || (b->device().is_cpu() && b->numel() == weights[i].size(0)),
                "row_gemv: bias " << i << " does not match its weight");
    first.push_back(first.back() + weights[i].size(0));
  }
  // float32 values of x and the biases (a bf16 layer's: widened, as at::linear sums them in float32).
  const at::Tensor xc = x.to(at::kFloat).contiguous();
  std::vector<at::Tensor> bias_values(weights.size());
  for (size_t i = 0; i < biases.size(); ++i)
    if (biases[i].defined()) bias_values[i] = biases[i].to(at::kFloat).contiguous();
  auto shape = x.sizes().vec();
  shape.back() = first.back();
  at::Tensor y = at::empty(shape, x.options().dtype(at::kFloat));
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Blocks of kGemvRows output rows over the weights concatenated; a chunk of
  // a thread reads at least ~256 KiB of weights, so small matrices stay on one.
  const int64_t rows = first.back(), blocks = (rows + cpu::kGemvRows - 1) / cpu::kGemvRows;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 18) / (cpu::kGemvRows * K * int64_t(weights.front().element_size())));
  parallel::host_parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * cpu::kGemvRows, r1 = std::min(rows, b1 * cpu::kGemvRows);
    for (size_t i = 0; i < weights.size(); ++i) {
      const int64_t lo = std::max(r0, first[i]) - first[i], hi = std::min(r1, first[i + 1]) - first[i];
      if (lo >= hi) continue;
      const at::Tensor& b = bias_values[i];
      gemv_rows_of(k, weights[i], xp, b.defined() ? b.data_ptr<float>() : nullptr, lo, hi, yp + first[i]);
    }
  });
  return x.scalar_type() == at::kFloat ? y : y.to(x.scalar_type());  // bf16: rounded once, as at::linear's
}

}  // namespace hpcrl::rollout
