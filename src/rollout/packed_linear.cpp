// Packed weights for the CPU GEMM (packed_linear.h).
#include "hpcrl/rollout/packed_linear.h"

#include <algorithm>
#include <cstdlib>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/util/check.h"
#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout {

namespace {
// n uninitialised floats, backed by transparent huge pages where the kernel
// offers them on request (Linux, THP "madvise"): the packed weights and the
// logits are hundreds of MB streamed every step, which with 4 KiB pages costs
// a page fault per 4 KiB on first touch and a TLB miss per 4 KiB on every pass.
at::Tensor huge_page_floats(int64_t n) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t bytes = std::max<size_t>(size_t(n) * sizeof(float), 1);
  if (bytes < kHuge) return at::empty({n}, at::kFloat);
  void* p = nullptr;
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  if (posix_memalign(&p, kHuge, rounded) != 0) return at::empty({n}, at::kFloat);
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it the pages are ordinary ones
#endif
  return at::from_blob(p, {n}, [](void* q) { std::free(q); }, at::TensorOptions().dtype(at::kFloat));
}
}  // namespace

at::Tensor StepBuffer::take(int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (!storage_.defined() || storage_.numel() < n) storage_ = huge_page_floats(n);
  return storage_.narrow(0, 0, n).view({rows, cols});
}

PackedLinear::PackedLinear(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
                           const cpu::Kernels* kernels)
    : kernels_(kernels ? kernels : &cpu::best_kernels()) {
  pack(weights, biases);
}

void PackedLinear::pack(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases) {
  HPCRL_CHECK(kernels_ && !weights.empty() && (biases.empty() || biases.size() == weights.size()),
              "PackedLinear needs weights and, if any, one bias slot per weight");
  const int64_t K = weights.front().size(1);
  int64_t N = 0;
  for (const auto& w : weights) {
    HPCRL_CHECK(w.dim() == 2 && w.size(1) == K && w.scalar_type() == at::kFloat && w.device().is_cpu(),
                "PackedLinear packs float32 CPU [N, " << K << "] weights, got " << w.sizes() << " "
                                                       << w.scalar_type() << " on " << w.device());
    N += w.size(0);
  }
  const int64_t P = kernels_->panel, panels = (N + P - 1) / P;
  if (!packed_.defined() || K != k_ || panels != panels_) packed_ = huge_page_floats(panels * K * P).view({panels, K, P});
  k_ = K;
  n_ = N;
  panels_ = panels;
  // Rows of the concatenated weight matrix, and the bias entry of each (if any).
  std::vector<at::Tensor> dense_weights, dense_biases;  // contiguous: the pointers below stay valid
  std::vector<const float*> row, row_bias;
  for (size_t i = 0; i < weights.size(); ++i) {
    const at::Tensor w = dense_weights.emplace_back(weights[i].contiguous());
    const at::Tensor b = biases.empty() || !biases[i].defined() ? at::Tensor() : biases[i].contiguous();
    if (b.defined()) dense_biases.push_back(b);
    for (int64_t r = 0; r < w.size(0); ++r) {
      row.push_back(w.data_ptr<float>() + r * K);
      row_bias.push_back(b.defined() ? b.data_ptr<float>() + r : nullptr);
    }
  }
  float* out = packed_.data_ptr<float>();
  row.resize(panels * P, nullptr);  // the last panel's padding: null rows, packed as zeros
  const auto pack_panel = kernels_->pack_panel;
  parallel::host_parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) pack_panel(row.data() + p * P, K, out + p * K * P);
  });
  bias_ = at::Tensor();
  if (!dense_biases.empty()) {
    bias_ = at::zeros({panels * P}, at::kFloat);
    float* b = bias_.data_ptr<float>();
    for (int64_t n = 0; n < N; ++n)
      if (row_bias[n]) b[n] = *row_bias[n];
  }
}

at::Tensor PackedLinear::forward(const at::Tensor& x, StepBuffer& out) const {
  HPCRL_CHECK(defined() && x.size(-1) == k_ && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "PackedLinear over " << k_ << " inputs got " << x.sizes() << " " << x.scalar_type());
  const at::Tensor rows = x.reshape({-1, k_}).contiguous();
  const int64_t M = rows.size(0), P = kernels_->panel, ldy = panels_ * P;
  at::Tensor y = out.take(M, ldy);
  const float* xp = rows.data_ptr<float>();
  const float* wp = packed_.data_ptr<float>();
  const float* bp = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const auto gemm = kernels_->gemm;
  const int64_t K = k_;
  // Panels split over threads (each reads its own weights); a product too
  // small to pay for waking a second thread runs on one.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(1, M * K * P));
  parallel::host_parallel_for(0, panels_, grain,
                              [&](int64_t p0, int64_t p1) { gemm(xp, M, K, K, wp, bp, p0, p1, yp, ldy); });
  auto shape = x.sizes().vec();
  shape.back() = n_;
  return y.narrow(1, 0, n_).view(shape);
}

}  // namespace hpcrl::rollout
