// `hpcrl calibrate [--device cpu|cuda] [--dtype float32|bfloat16] [--out FILE] [--name NAME]`
// (under mpirun/srun for links): measures this machine for the cost model
// (cost/hardware_profile.h) and writes a profile `plan --estimate --hardware
// FILE` accepts:
//   compute     matmuls [1024, w] × [w, 3w] at widths w = 128 … 2048 (by_width; the
//               estimate interpolates a model's width), peak = the fastest, efficiency 1;
//   memory      a 256 MB tensor copy (bytes read + written per second), efficiency 1;
//               element-wise: adds into fresh outputs of 1, 4 and 16 MB (the sizes of
//               a layer's activations), allocation included;
//   overhead    seconds per small op (a 4-element in-place add), the per-launch cost;
//   eager_op_s  what an op costs end to end as the model issues it: a chain of small out-of-place ops
//               (calibrate_ops.h: scale, add, norm, SiLU, softmax on [8, 64]) timed op by op with one
//               sync at the end, per op; the estimate charges this per op where the profile has it;
//   train_op_s  the chain recorded for autograd and its backward, per op as the estimate counts a
//               training pass's ops (calibrate_ops.h);
//   graph_kernel_overhead_s  (CUDA builds and --device cuda only) the same chain captured once as a CUDA
//               graph and replayed, per kernel; on a CPU it is not measured and not written;
//   links       which ranks are timed is cost::plan_link_measures' plan: all-reduces over
//               each node's ranks (intra_node) and over one rank per node (inter_node),
//               latency from 8 bytes, bandwidth from one 8 MiB gradient bucket (ring:
//               2(n−1)/n of the bytes per rank); a ping-pong between two ranks for each
//               link's p2p_ values (half the round trip). With one rank on node 0 nothing
//               is measured and the profile says so; on one node inter_node repeats
//               intra_node.
// Each value is the best of repeated timings (this machine is shared), each
// repeat started on every rank together: ranks that share a node share its
// cores and memory, so the profile describes a run with as many ranks per node
// as the calibration had (calibrate with the ranks per node your runs use).
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <tuple>

#include "cli/calibrate_ops.h"
#include "cli/command.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/cost/link_plan.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/log.h"

namespace {

struct CalibrateArgs {
  std::string device = "cpu", dtype = "float32", out = "profiles/calibrated.yaml", name;
  double memory_capacity = 0;
};

// Best seconds of `fn` over repeats lasting at least `budget_s` in all (and ≥ 3 repeats), each
// repeat started on every rank together; the same number of repeats on every rank.
template <class Fn>
double best_seconds(Fn&& fn, double budget_s = 0.5) {
  using clock = std::chrono::steady_clock;
  hpcrl::dist::Communicator& world = *hpcrl::dist::world_comm();
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 1000; ++rep) {
    at::Tensor more = at::full({1}, rep < 3 || spent < budget_s ? 1 : 0, at::kInt);
    world.all_reduce(more, hpcrl::dist::ReduceOp::kMax);  // every rank repeats while any still needs to
    if (more.item<int>() == 0) break;
    world.barrier();
    const auto t0 = clock::now();
    fn();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

// Matmul FLOP/s of [1024, w] × [w, 3w] (a layer's projections at width w, 1024 tokens) per width.
std::vector<std::pair<double, double>> gemm_rates(const at::TensorOptions& o) {
  std::vector<std::pair<double, double>> rates;
  for (int64_t w : {128, 256, 512, 1024, 2048}) {
    at::Tensor a = at::randn({1024, w}, o), b = at::randn({w, 3 * w}, o);
    const double sec = best_seconds([&] { at::mm(a, b).sum().item<float>(); });
    rates.emplace_back(double(w), 2.0 * 1024.0 * double(w) * double(3 * w) / sec);
  }
  return rates;
}

double copy_bandwidth(const at::TensorOptions& o) {
  const int64_t n = 64 << 20;  // 64 Mi fp32 elements = 256 MB
  at::Tensor src = at::ones({n}, o.dtype(at::kFloat)), dst = at::empty({n}, o.dtype(at::kFloat));
  const double sec = best_seconds([&] {
    dst.copy_(src);
    dst[0].item<float>();
  });
  return 2.0 * double(n) * 4 / sec;  // read + write
}

// Element-wise ops as a model's layers run them: a fresh output each time (its allocation included), on
// activation-sized tensors (1, 4 and 16 MB); bytes read + written per second, the mean over the sizes.
double elementwise_bandwidth(const at::TensorOptions& o) {
  double sum = 0;
  const std::vector<int64_t> sizes = {256 << 10, 1 << 20, 4 << 20};  // fp32 elements
  for (int64_t n : sizes) {
    at::Tensor x = at::ones({n}, o.dtype(at::kFloat)), y = at::ones({n}, o.dtype(at::kFloat));
    const int ops = 16;
    const double sec = best_seconds([&] {
      at::Tensor z;
      for (int i = 0; i < ops; ++i) z = at::add(x, y);
      z[0].item<float>();
    }, 0.3);
    sum += 3.0 * double(n) * 4 * ops / sec;  // two inputs read, one output written
  }
  return sum / double(sizes.size());
}

double op_overhead(const at::TensorOptions& o) {
  at::Tensor t = at::ones({4}, o);
  const int ops = 2000;
  const double sec = best_seconds([&] {
    for (int i = 0; i < ops; ++i) t.add_(1.0);
    t[0].item<float>();
  }, 0.2);
  return sec / ops;
}

// The slowest rank's view of `seconds` (0 where a rank took no part): every rank writes the same numbers.
double slowest(double seconds) {
  at::Tensor t = at::full({1}, seconds, at::kDouble);
  hpcrl::dist::world_comm()->all_reduce(t, hpcrl::dist::ReduceOp::kMax);
  return t.item<double>();
}

// The bandwidths are measured with messages of one gradient bucket (optim.bucket_mb's default, 8 MiB): what
// a dp all-reduce sends per call. Rates differ by message size far more than an α–β link says: Open MPI
// over shared memory here all-reduces 8 MiB at ~4.6 GB/s and 64 MiB at ~0.37 GB/s.
int64_t bucket_elements() { return hpcrl::config::OptimConfig().bucket_bytes() / 4; }

// α–β of a ring all-reduce over `group` (nullptr on ranks outside it): latency from 8 bytes over 2(n−1)
// steps, bandwidth from one bucket of which each rank moves 2(n−1)/n. Collective over the world.
hpcrl::cost::Link all_reduce_link(const hpcrl::dist::CommPtr& group, int group_size, const at::TensorOptions& o) {
  at::Tensor small = at::ones({2}, o.dtype(at::kFloat)), big = at::ones({bucket_elements()}, o.dtype(at::kFloat));
  // Ranks outside the group time an empty body, so every rank takes part in best_seconds' agreement.
  auto timed = [&](at::Tensor& t) { return best_seconds([&] { if (group) group->all_reduce(t); }, 0.3); };
  const double t_small = slowest(timed(small));
  const double t_big = slowest(timed(big));
  const double n = group_size, steps = 2.0 * (n - 1);
  hpcrl::cost::Link link;
  link.latency_s = t_small / steps;
  link.bandwidth = 2.0 * (n - 1) / n * double(big.numel()) * 4 / std::max(1e-9, t_big - steps * link.latency_s);
  return link;
}

// One-way time of a message between world ranks `pair` (a ping-pong, half the round trip): latency from
// 8 bytes, bandwidth from one bucket. Collective over the world; ranks outside the pair only keep time.
std::pair<double, double> ping_pong(std::pair<int, int> pair, const at::TensorOptions& o) {
  hpcrl::dist::Communicator& world = *hpcrl::dist::world_comm();
  const int me = world.rank();
  auto one_way = [&](int64_t elements) {
    at::Tensor t = at::ones({elements}, o.dtype(at::kFloat));
    const double round_trip = best_seconds([&] {
      if (me == pair.first) world.send(t, pair.second), world.recv(t, pair.second);
      if (me == pair.second) world.recv(t, pair.first), world.send(t, pair.first);
    }, 0.3);
    return slowest(me == pair.first || me == pair.second ? round_trip / 2 : 0.0);
  };
  const double latency = one_way(2);
  const double big = one_way(bucket_elements());
  return {latency, double(bucket_elements()) * 4 / std::max(1e-9, big - latency)};
}

struct MeasuredLinks {
  hpcrl::cost::Link intra, inter;  // inter: only with more than one node
  int gpus_per_node = 1, nodes = 1;
  bool measured = false;  // at least two ranks on node 0
};

// Runs cost::plan_link_measures' plan: node-local and cross-node all-reduces, then the ping-pongs.
MeasuredLinks measure_links(const at::TensorOptions& o) {
  using namespace hpcrl;
  const dist::WorldInfo& w = dist::world();
  at::Tensor nodes = dist::world_comm()->all_gather(at::full({1}, w.node, at::kInt));
  const std::vector<int> node_of_rank(nodes.data_ptr<int>(), nodes.data_ptr<int>() + nodes.numel());
  const cost::LinkPlan plan = cost::plan_link_measures(node_of_rank);
  MeasuredLinks m;
  m.gpus_per_node = plan.gpus_per_node;
  m.nodes = int(plan.node_groups.size());
  m.measured = plan.intra_pair.first >= 0;
  if (m.measured) {
    const dist::CommPtr node = dist::new_groups(plan.node_groups, "calibrate/node");
    m.intra = all_reduce_link(node && node->size() > 1 ? node : nullptr, plan.gpus_per_node, o);
    std::tie(m.intra.p2p_latency_s, m.intra.p2p_bandwidth) = ping_pong(plan.intra_pair, o);
  }
  if (plan.inter_pair.first >= 0) {
    const dist::CommPtr leaders = dist::new_group(plan.node_leaders, "calibrate/nodes");
    m.inter = all_reduce_link(leaders, int(plan.node_leaders.size()), o);
    std::tie(m.inter.p2p_latency_s, m.inter.p2p_bandwidth) = ping_pong(plan.inter_pair, o);
  }
  return m;
}

double physical_memory() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

// The measured compute, memory and per-op costs of the device `o` names.
hpcrl::cost::HardwareProfile measure_device(const CalibrateArgs& a, const at::TensorOptions& o) {
  using namespace hpcrl;
  cost::HardwareProfile p;
  p.name = a.name.empty() ? a.device + "-calibrated" : a.name;
  p.width_rates = gemm_rates(o);
  for (const auto& [w, rate] : p.width_rates) p.peak_flops = std::max(p.peak_flops, rate);
  p.compute_efficiency = 1;  // the measured rates are achieved ones
  p.memory_bandwidth = copy_bandwidth(o);
  p.memory_efficiency = 1;
  p.elementwise_bandwidth_peak = elementwise_bandwidth(o);
  p.async_launch = a.device == "cuda";
  p.memory_capacity = a.memory_capacity > 0 ? a.memory_capacity : physical_memory();
  p.kernel_overhead_s = op_overhead(o);
  const cli::BestSeconds timer = [](const std::function<void()>& fn) { return best_seconds(fn, 0.3); };
  p.eager_op_s = cli::eager_op_seconds(o, timer);
  p.train_op_s = cli::train_op_seconds(o, timer);
  return p;
}

// CUDA devices: graph_kernel_overhead_s into `p`. Returns the profile comment's line on it.
std::string measure_graph_replay(const CalibrateArgs& a, const at::TensorOptions& o, hpcrl::cost::HardwareProfile& p) {
  std::string graph_note = "graph_kernel_overhead_s: not measured (a CPU has no CUDA graphs): plan --estimate "
                           "--decode-graphs refuses this profile.\n";
  if (a.device == "cuda") {
#ifdef HPCRL_TORCH_CUDA
    const hpcrl::cli::BestSeconds timer = [](const std::function<void()>& fn) { return best_seconds(fn, 0.3); };
    p.graph_kernel_overhead_s = hpcrl::cli::graph_replay_op_seconds(o, timer);
    graph_note = "graph_kernel_overhead_s: the same chain captured once as a CUDA graph and replayed, per kernel.\n";
#else
    (void)o, (void)p;
    graph_note = "graph_kernel_overhead_s: not measured (this hpcrl was built without CUDA LibTorch).\n";
#endif
  }
  return graph_note;
}

// The profile's comment: how each number was measured, and which were not.
std::string profile_comment(const CalibrateArgs& a, int ranks, const std::string& graph_note,
                            const MeasuredLinks& links) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  std::string comment = "measured by `hpcrl calibrate --device " + a.device + " --dtype " + a.dtype + "` on " + host +
                        " with " + std::to_string(ranks) + " rank(s), OMP threads " +
                        std::to_string(at::get_num_threads()) + ".\n"
                        "compute: matmuls [1024, w] x [w, 3w] per width w (by_width); peak = the fastest.\n"
                        "memory: a 256 MB copy; elementwise_bandwidth: adds into fresh 1-16 MB outputs;\n"
                        "kernel_overhead_s: one 4-element in-place add;\n"
                        "eager_op_s: a chain of 10 small out-of-place ops ([8, 64]: scale, add, RMS norm, SiLU, softmax) "
                        "issued op by op, one sync at the end, per op; the estimate charges it per op;\n"
                        "train_op_s: the same chain recorded for autograd plus its backward, one sync at the end, per "
                        "op of a training pass as the estimate counts them (a forward op + 1.5 backward ops).\n" +
                        graph_note;
  comment += links.measured ? "intra_node: all-reduce over each node's ranks (8 B latency, 8 MiB bandwidth: a gradient bucket); p2p_: a "
                              "ping-pong between rank 0 and the next rank on its node (half the round trip).\n"
                            : "intra_node: NOT measured (one rank on node 0; run under mpirun -np 2): the copy bandwidth "
                              "and the op overhead stand in, so multi-rank estimates on this profile are unreliable.\n";
  comment += links.nodes > 1 ? "inter_node: all-reduce over one rank per node (" + std::to_string(links.nodes) +
                                   " nodes); p2p_: a ping-pong between rank 0 and the first rank of node 1.\n"
                             : std::string("inter_node = intra_node (one node: launch on two to measure it).\n");
  return comment;
}

int run_calibrate(const CalibrateArgs& a) {
  using namespace hpcrl;
  const auto& w = dist::init(nullptr, nullptr);
  if (a.device != "cpu" && a.memory_capacity <= 0)
    throw InputError("--memory-capacity is needed for --device " + a.device + " (the device's bytes, e.g. 80e9)");
  const std::optional<config::Device> device = config::parse_enum<config::Device>(a.device);
  if (!device) throw InputError("--device: unknown device '" + a.device + "': use cpu or cuda");
  dist::bind_device(*device);
  const at::ScalarType dtype = a.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
  const at::TensorOptions o = at::TensorOptions().dtype(dtype).device(a.device == "cpu" ? at::Device(at::kCPU)
                                                                                        : at::Device(at::kCUDA));
  torch::NoGradGuard no_grad;
  cost::HardwareProfile p = measure_device(a, o);
  const std::string graph_note = measure_graph_replay(a, o, p);
  const MeasuredLinks links = measure_links(o);
  p.gpus_per_node = links.gpus_per_node;
  p.intra_node = links.measured ? links.intra : cost::Link{p.memory_bandwidth, p.kernel_overhead_s};
  p.inter_node = links.nodes > 1 ? links.inter : p.intra_node;
  const std::string comment = profile_comment(a, w.size, graph_note, links);
  if (w.rank == 0) {
    fs::write_file_atomic(a.out, cost::profile_yaml(p, comment));
    std::printf("%s", cost::profile_yaml(p, comment).c_str());
    std::printf("wrote %s\n", a.out.c_str());
  }
  dist::finalize();
  return 0;
}

hpcrl::cli::Registration reg{"calibrate", 27, [](CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub = app.add_subcommand("calibrate", "Measure this machine (matmul FLOP/s, memory bandwidth, per-op costs, "
                                              "all-reduce and point-to-point over the launched ranks) into a hardware profile");
  sub->add_option("--device", args->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sub->add_option("--dtype", args->dtype, "Matmul dtype (the run's)")
      ->check(CLI::IsMember({"float32", "bfloat16"}))->capture_default_str();
  sub->add_option("--out", args->out, "Profile file to write")->capture_default_str();
  sub->add_option("--name", args->name, "Profile name (default: DEVICE-calibrated)");
  sub->add_option("--memory-capacity", args->memory_capacity, "Device memory in bytes (default on cpu: physical RAM)")
      ->check(CLI::PositiveNumber);
  return [args] { return hpcrl::dist::run_or_abort([&] { return run_calibrate(*args); }); };
}};

}  // namespace
