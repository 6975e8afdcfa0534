// Linear layers of the engine's CPU fp32 path: the weights of one or more
// layers that read the same input — q/k/v, gate/up, or a single projection —
// concatenated and packed into column panels for the CPU GEMM
// (src/rollout/cpu_kernels.h), so that one call computes all their outputs for
// every row while reading each weight once, at one row as at 128.
//
// The packed matrix is the engine's own copy, made from the model's weights
// when a generation call starts (the model's parameters stay as they are, and
// weight sync keeps copying named parameters). The engine keeps it from call
// to call and packs each call's weights into the same memory: fresh pages
// cost the kernel a zeroing pass on first touch (measured 5.5 s per 2 GB on
// this project's VMs), more than packing itself.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace hpcrl::rollout {

namespace cpu {
struct Kernels;
}

// A buffer a step writes its output into and the next step reuses: it keeps
// the largest [rows, cols] it was asked for, so repeated decode steps allocate
// nothing (large fresh allocations are page-faulted in every time).
class StepBuffer {
 public:
  // A contiguous [rows, cols] float32 CPU tensor over this buffer's storage;
  // valid until the next take().
  at::Tensor take(int64_t rows, int64_t cols);

 private:
  at::Tensor storage_;
};

class PackedLinear {
 public:
  PackedLinear() = default;
  // weights[i]: [N_i, K] float32 on the CPU, all with the same K; biases[i]:
  // [N_i] or undefined (biases empty: none). The output columns are those of
  // the weights in order. `kernels` null: the widest this CPU runs.
  PackedLinear(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
               const cpu::Kernels* kernels = nullptr);

  // Packs `weights` (as the constructor takes them) again, into the memory
  // already held when the packed shape is unchanged: how the engine follows
  // the trainer's weights from one generation call to the next.
  void pack(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases);

  bool defined() const { return packed_.defined(); }
  int64_t in_features() const { return k_; }
  int64_t out_features() const { return n_; }
  // The memory the packed matrix lives in (what pack() keeps).
  const void* storage() const { return packed_.defined() ? packed_.data_ptr() : nullptr; }

  // x: [..., K] float32 on the CPU -> [..., out_features] = x · Wᵀ (+ b), a view
  // of `out` (whose rows are padded to whole panels): valid until `out` is
  // taken again.
  at::Tensor forward(const at::Tensor& x, StepBuffer& out) const;

 private:
  const cpu::Kernels* kernels_ = nullptr;
  int64_t n_ = 0, k_ = 0, panels_ = 0;
  at::Tensor packed_;  // [panels, K, panel]: packed[p][k][c] = W[p·panel + c][k], zero past N
  at::Tensor bias_;    // [panels · panel] (zero past N), or undefined
};

}  // namespace hpcrl::rollout
