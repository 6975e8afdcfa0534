// What a device and its links can do, for the cost model (work_depth.h,
// stage_estimate.h): peak numbers from the vendor's datasheet and the share of
// each that real kernels reach (efficiency factors), as data files under
// profiles/ (each value with its source in a comment) or written by
// `hpcrl calibrate` from measurements on the machine it runs on.
//
//   name: a100-40gb
//   compute: {peak_flops: 312e12, efficiency: 0.45}         # bf16 dense, achieved share
//   (calibrated profiles add by_width: {128: 1.1e10, ...}: measured matmul FLOP/s of
//    [1024, w] × [w, 3w], since small models' matrices run far below the peak)
//   memory: {bandwidth: 1.555e12, efficiency: 0.75, capacity: 40e9}
//   (optional elementwise_bandwidth: what element-wise ops on activation-sized tensors
//    reach, allocation of their outputs included; default the bandwidth)
//   kernel_overhead_s: 1.0e-5                                # per launched op
//   eager_op_s: 1.2e-5                 # optional, measured by `hpcrl calibrate`: one eager LibTorch op
//                                      # end to end (host dispatch, output allocation, launch, the op on
//                                      # a small tensor), the mean over a chain of small ops with one sync
//                                      # at its end; the estimate charges it per op in place of
//                                      # kernel_overhead_s (which then only describes the one 4-element add)
//   train_op_s: 3.0e-5                 # optional, measured by `hpcrl calibrate`: one op of a training pass,
//                                      # the chain above recorded for autograd plus its backward, per op as
//                                      # the estimate counts them (op_counts.h: a forward op and 1.5 backward
//                                      # ops); charged per op of forward/backward passes (else eager_op_s)
//   graph_kernel_overhead_s: 2.0e-6    # optional: per kernel replayed from a CUDA graph (a decode
//                                      # step captured once, `plan --estimate --decode-graphs`);
//                                      # `calibrate --device cuda` measures it (a captured chain of small
//                                      # ops, replayed), on a CPU it is not measured and not written
//   (the per-op values lie in (0, 10 ms]: beyond that a value is not a per-op cost)
//   kernel_launch: asynchronous        # optional: ops queue behind the work (GPU); default
//                                      # synchronous: each op's dispatch adds to the time (CPU)
//   gpus_per_node: 4
//   intra_node: {bandwidth: 300e9, latency_s: 8e-6}          # per direction, per device
//   (optional p2p_bandwidth, p2p_latency_s: one message between two ranks; default the above)
//   inter_node: {bandwidth: 25e9, latency_s: 1.5e-5}
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hpcrl::cost {

struct Link {
  double bandwidth = 0;   // bytes/s per direction, per device
  double latency_s = 0;   // per message
  // One message between two ranks, where measured (`hpcrl calibrate`'s ping-pong): what a pipeline
  // send moves at, which the collectives' ring steps need not match (MPI over shared memory, NCCL's
  // channels). 0: not given; the values above stand in.
  double p2p_bandwidth = 0, p2p_latency_s = 0;
  Link p2p() const {
    return {p2p_bandwidth > 0 ? p2p_bandwidth : bandwidth, p2p_latency_s > 0 ? p2p_latency_s : latency_s};
  }
};

struct HardwareProfile {
  std::string name, path;
  double peak_flops = 0, compute_efficiency = 1;  // at the run's dtype
  std::vector<std::pair<double, double>> width_rates;  // (model width, measured matmul FLOP/s), ascending
  double memory_bandwidth = 0, memory_efficiency = 1;
  double elementwise_bandwidth_peak = 0;          // 0: the memory bandwidth
  double memory_capacity = 0;                     // bytes per device
  double kernel_overhead_s = 0;
  double eager_op_s = 0;                          // 0: not measured (kernel_overhead_s stands in)
  double train_op_s = 0;                          // 0: not measured (op_seconds() stands in)
  double graph_kernel_overhead_s = 0;             // 0: not given (--decode-graphs refuses the profile)
  bool async_launch = false;                      // kernel_launch: asynchronous
  int gpus_per_node = 1;
  Link intra_node, inter_node;

  double flops() const { return peak_flops * compute_efficiency; }            // achievable FLOP/s
  // Achievable FLOP/s for a model of hidden size `width`: the measured rates interpolated in
  // log(width) (clamped at the ends) × compute_efficiency, or flops() without a table.
  double flops_at(double width) const;
  double bandwidth() const { return memory_bandwidth * memory_efficiency; }   // achievable bytes/s
  // Seconds each op the host dispatches eagerly costs the estimate: the measured end-to-end cost where the
  // profile has one (eager_op_s), else kernel_overhead_s.
  double op_seconds() const { return eager_op_s > 0 ? eager_op_s : kernel_overhead_s; }
  // Seconds each op of a forward/backward pass costs (recorded for autograd, its backward's share included):
  // train_op_s where measured, else op_seconds().
  double train_op_seconds() const { return train_op_s > 0 ? train_op_s : op_seconds(); }
  // Achievable bytes/s of element-wise ops (their reads and writes).
  double elementwise_bandwidth() const {
    return (elementwise_bandwidth_peak > 0 ? elementwise_bandwidth_peak : memory_bandwidth) * memory_efficiency;
  }
  // The link between ranks a and b when `per_node` ranks share a node.
  const Link& link(bool crosses_nodes) const { return crosses_nodes ? inter_node : intra_node; }
};

// `spec`: a profile file path, or the name of a shipped one (profiles/NAME.yaml).
// InputError naming the file, line and key when a value is missing or not a
// positive number, or listing the shipped names when `spec` is neither.
HardwareProfile load_profile(const std::string& spec);
HardwareProfile parse_profile(const std::string& yaml_text, const std::string& path);
// The shipped profiles' names, sorted.
std::vector<std::string> shipped_profiles();
// YAML text of `p` (what `hpcrl calibrate` writes), `comment` above it.
std::string profile_yaml(const HardwareProfile& p, const std::string& comment);

}  // namespace hpcrl::cost
