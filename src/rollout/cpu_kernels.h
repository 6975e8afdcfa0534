// The CPU kernels of the engine's fp32 decode path, compiled once per
// instruction set (AVX-512, AVX2 + FMA, and the portable baseline) and chosen
// at run time from what the CPU supports, so one binary runs everywhere and
// uses the widest vectors where they exist. Torch-free: raw pointers, and the
// caller splits the work over threads (packed_linear.cpp, sampling.cpp).
//
// Why hand-written: decode multiplies a few rows by every weight. LibTorch's
// CPU matmul (OpenBLAS, whose Debian build picks its AVX2 kernels on this
// machine) runs one row at half the memory bandwidth of a GEMV and 2..128 rows
// far slower than the weight traffic allows (it re-packs the weights every
// call); the sampler's exp/sum over a 152k vocabulary ran as five full passes
// with [rows, vocabulary] temporaries.
#pragma once

#include <cstdint>

namespace hpcrl::rollout::cpu {

enum class Isa { kBaseline, kAvx2, kAvx512 };

// Entries of one block of a row's weights summed together (row_exp's block_sums).
constexpr int64_t kSumBlock = 256;

// Weight rows gemv computes together (each a register accumulator chain).
constexpr int64_t kGemvRows = 8;

struct Kernels {
  Isa isa;
  const char* name;
  // Output columns per packed weight panel: the layout gemm reads
  // (packed[p][k][c] = W[p·panel + c][k], panels zero-padded).
  int64_t panel;

  // y[m][p·panel + c] = Σ_k x[m][k] · packed[p][k][c] (+ bias[p·panel + c]) for
  // m < rows and the panels [p0, p1) of a packed [panels, k, panel] matrix.
  // Each output is one fused multiply-add chain in k order whatever `rows` is,
  // so a row's result does not depend on the rows computed beside it.
  void (*gemm)(const float* x, int64_t rows, int64_t ldx, int64_t k, const float* packed, const float* bias,
               int64_t p0, int64_t p1, float* y, int64_t ldy);
  // One panel of that layout: panel[i][c] = rows[c][i] for i < k and c < panel,
  // 0 where rows[c] is null (the padding past the last weight row).
  void (*pack_panel)(const float* const* rows, int64_t k, float* panel);

  // y[o] = Σ_j w[o·ldw + j] · x[j] (+ bias[o]) for rows o in [o0, o1) of a
  // row-major matrix: one decode row's projection, reading each weight once.
  // kGemvRows rows at a time, whose streams side by side keep more loads in
  // flight than one row's (1.28x the rate of at::mv, OpenBLAS, over a 0.5B
  // model's matrices at 2 threads: benchmarks/rollout/bench_gemv). A row's
  // result does not depend on o0, o1 or the rows beside it.
  void (*gemv)(const float* w, int64_t ldw, int64_t k, const float* x, const float* bias, int64_t o0, int64_t o1,
               float* y);
  // The same for bfloat16 weights (their raw 16 bits): each widened to float32
  // as it is read, the sums and x in float32, so a row reads half the bytes.
  void (*gemv_bf16)(const uint16_t* w, int64_t ldw, int64_t k, const float* x, const float* bias, int64_t o0,
                    int64_t o1, float* y);

  // The largest entry of x[0, n) and (argmax) the first index holding it.
  float (*row_max)(const float* x, int64_t n, int64_t* argmax);

  // w[i] = exp((x[i] − shift) · scale), set to 0 below `floor`; returns the sum
  // of the kept w in float64 and, in block_sums[b], that of block b (entries
  // [b·kSumBlock, (b+1)·kSumBlock)); `all` (if not null) receives the sum before
  // the floor. w and block_sums may be null (only the sums are wanted).
  double (*row_exp)(const float* x, int64_t n, float shift, float scale, float floor, float* w, double* block_sums,
                    double* all);

  // The decode step's small per-row operations, each one pass instead of a
  // handful of LibTorch ops (whose dispatch costs as much as the work at one
  // row):
  // y[r] = w · x[r] / sqrt(mean(x[r]²) + eps) for rows of c entries (RMSNorm; the
  // statistic in float64, a pass of c entries beside the GEMMs' c · outputs).
  void (*rms_norm)(const float* x, int64_t rows, int64_t ldx, int64_t c, const float* w, float eps, float* y,
                   int64_t ldy);
  // Rotates `heads` heads of d entries of every row in place, in the
  // rotate-half layout (entry i pairs with i + d/2), by the row's cos/sin
  // tables of d entries (at table + r·ldt): RoPE.
  void (*rotate)(float* x, int64_t rows, int64_t ldx, int64_t heads, int64_t d, const float* cos, const float* sin,
                 int64_t ldt);
  // One row's attention for the g query heads sharing one key/value head:
  // q [g, d] contiguous, keys and values [n, d] (the cached columns 0..n-1),
  // out[h] = Σ_t softmax_t(scale · q[h]·k[t]) v[t]; `scores` holds n floats
  // (each q·k is summed in float64 and rounded once, the softmax sum is float64).
  void (*attend)(const float* q, int64_t g, const float* k, const float* v, int64_t n, int64_t d, float scale,
                 float* out, float* scores);
};

// The widest kernels this CPU runs.
const Kernels& best_kernels();
// The kernels of one instruction set, or null when the CPU (or compiler) lacks it.
const Kernels* kernels_for(Isa isa);

}  // namespace hpcrl::rollout::cpu
