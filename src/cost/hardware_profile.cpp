// Hardware profiles as YAML files (hardware_profile.h).
#include "hpcrl/cost/hardware_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hpcrl/util/error.h"

#ifndef HPCRL_PROFILE_DIR
#define HPCRL_PROFILE_DIR "profiles"
#endif

namespace hpcrl::cost {

namespace {
namespace fs = std::filesystem;

// Where shipped profiles are: $HPCRL_PROFILES; else profiles/ beside the executable's folder
// (build/hpcrl -> profiles/, a copied tree works wherever it is); else the source tree's
// profiles/ the binary was built from.
fs::path profile_dir() {
  if (const char* env = std::getenv("HPCRL_PROFILES"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::is_directory(exe.parent_path().parent_path() / "profiles", ec))
    return exe.parent_path().parent_path() / "profiles";
  return HPCRL_PROFILE_DIR;
}

// `path` as the user would write it: relative to the working directory when it is below it.
std::string shown_path(const fs::path& path) {
  std::error_code ec;
  const fs::path rel = fs::relative(path, fs::current_path(ec), ec);
  if (ec || rel.empty() || *rel.begin() == "..") return path.string();
  return rel.string();
}

// `section.key` of `parent` as a positive number; errors name path:line and the key.
double positive(const YAML::Node& parent, const std::string& key, const std::string& path,
                const std::string& section = "") {
  const std::string name = section.empty() ? key : section + "." + key;
  const YAML::Node n = parent[key];
  if (!n) throw InputError(path + ": missing `" + name + "` (a positive number)");
  const std::string at = path + ":" + std::to_string(n.Mark().line + 1) + ": `" + name + "`";
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    throw InputError(at + " must be a number, not " + (n.IsScalar() ? n.Scalar() : std::string("a collection")));
  }
  if (!(v > 0)) throw InputError(at + " must be positive, not " + n.Scalar());
  return v;
}

// `text` as a number, or NaN when it is not one (a by_width key).
double number_or_nan(const std::string& text) {
  try {
    return YAML::Node(text).as<double>();
  } catch (const YAML::Exception&) {
    return std::nan("");
  }
}

// The largest per-op cost a profile may give (eager_op_s, train_op_s, graph_kernel_overhead_s): 10 ms. A
// value beyond it is a whole step's time or a unit slip (milliseconds written as seconds), not one op's cost.
constexpr double kMaxPerOpSeconds = 1e-2;

// `key` of `root` as seconds per op: positive and at most kMaxPerOpSeconds.
double per_op_seconds(const YAML::Node& root, const std::string& key, const std::string& path) {
  const double v = positive(root, key, path);
  if (v > kMaxPerOpSeconds)
    throw InputError(path + ":" + std::to_string(root[key].Mark().line + 1) + ": `" + key + "` is seconds per op, at "
                     "most 0.01 (10 ms), not " + root[key].Scalar() + "; rerun `hpcrl calibrate` or give it in seconds");
  return v;
}

YAML::Node section(const YAML::Node& root, const std::string& key, const std::string& path) {
  const YAML::Node n = root[key];
  if (!n || !n.IsMap()) throw InputError(path + ": missing mapping `" + key + "`");
  return n;
}

// A key this parser does not read would be a value the estimate silently ignores: InputError naming it
// (`prefix` + key) at its line, then `keys_are` and the keys `map` may hold.
void reject_unknown_keys(const YAML::Node& map, const std::vector<std::string>& keys, const std::string& path,
                         const std::string& prefix, const std::string& keys_are) {
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("a collection");
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    std::string known;
    for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
    throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key `" + prefix + key + "`" +
                     keys_are + known);
  }
}

Link parse_link(const YAML::Node& root, const std::string& key, const std::string& path) {
  const YAML::Node n = section(root, key, path);
  reject_unknown_keys(n, {"bandwidth", "latency_s", "p2p_bandwidth", "p2p_latency_s"}, path, key + ".",
                      "; a link's keys are ");
  Link l{positive(n, "bandwidth", path, key), positive(n, "latency_s", path, key)};
  if (n["p2p_bandwidth"]) l.p2p_bandwidth = positive(n, "p2p_bandwidth", path, key);
  if (n["p2p_latency_s"]) l.p2p_latency_s = positive(n, "p2p_latency_s", path, key);
  return l;
}

std::string link_yaml(const Link& l) {
  std::ostringstream o;
  o << "{bandwidth: " << l.bandwidth << ", latency_s: " << l.latency_s;
  if (l.p2p_bandwidth > 0) o << ", p2p_bandwidth: " << l.p2p_bandwidth;
  if (l.p2p_latency_s > 0) o << ", p2p_latency_s: " << l.p2p_latency_s;
  return o.str() + "}";
}
}  // namespace

double HardwareProfile::flops_at(double width) const {
  if (width_rates.empty()) return flops();
  if (width <= width_rates.front().first) return width_rates.front().second * compute_efficiency;
  for (size_t i = 1; i < width_rates.size(); ++i) {
    const auto &lo = width_rates[i - 1], &hi = width_rates[i];
    if (width > hi.first) continue;
    const double t = std::log(width / lo.first) / std::log(hi.first / lo.first);
    return (lo.second + t * (hi.second - lo.second)) * compute_efficiency;
  }
  return width_rates.back().second * compute_efficiency;
}

namespace {
// `compute:`: peak FLOP/s, efficiency and the optional measured rates by model width.
void parse_compute(const YAML::Node& root, const std::string& path, HardwareProfile& p) {
  const YAML::Node compute = section(root, "compute", path);
  p.peak_flops = positive(compute, "peak_flops", path, "compute");
  p.compute_efficiency = positive(compute, "efficiency", path, "compute");
  if (const YAML::Node w = compute["by_width"]) {
    if (!w.IsMap()) throw InputError(path + ":" + std::to_string(w.Mark().line + 1) + ": `compute.by_width` maps a "
                                     "model width to its measured FLOP/s, e.g. {128: 1.1e10, 512: 2.5e10}");
    for (const auto& kv : w) {
      const std::string width = kv.first.IsScalar() ? kv.first.Scalar() : std::string("a collection");
      const double at_width = number_or_nan(width);
      if (!(at_width > 0))
        throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": `compute.by_width` key '" + width +
                         "' must be a positive model width, e.g. {128: 1.1e10, 512: 2.5e10}");
      p.width_rates.emplace_back(at_width, positive(w, width, path, "compute.by_width"));
    }
    std::sort(p.width_rates.begin(), p.width_rates.end());
  }
}

// `memory:`, the per-op costs and `kernel_launch`.
void parse_memory_and_ops(const YAML::Node& root, const std::string& path, HardwareProfile& p) {
  const YAML::Node memory = section(root, "memory", path);
  p.memory_bandwidth = positive(memory, "bandwidth", path, "memory");
  p.memory_efficiency = positive(memory, "efficiency", path, "memory");
  p.memory_capacity = positive(memory, "capacity", path, "memory");
  if (memory["elementwise_bandwidth"]) p.elementwise_bandwidth_peak = positive(memory, "elementwise_bandwidth", path, "memory");
  p.kernel_overhead_s = positive(root, "kernel_overhead_s", path);
  if (root["eager_op_s"]) p.eager_op_s = per_op_seconds(root, "eager_op_s", path);
  if (root["train_op_s"]) p.train_op_s = per_op_seconds(root, "train_op_s", path);
  if (root["graph_kernel_overhead_s"]) p.graph_kernel_overhead_s = per_op_seconds(root, "graph_kernel_overhead_s", path);
  if (const YAML::Node launch = root["kernel_launch"]) {
    const std::string v = launch.IsScalar() ? launch.Scalar() : "";
    if (v != "asynchronous" && v != "synchronous")
      throw InputError(path + ":" + std::to_string(launch.Mark().line + 1) +
                       ": `kernel_launch` is asynchronous (a GPU: ops queue behind the work) or synchronous (a CPU), "
                       "not " + (v.empty() ? std::string("a collection") : v));
    p.async_launch = v == "asynchronous";
  }
}
}  // namespace

HardwareProfile parse_profile(const std::string& yaml_text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) throw InputError(path + ": a hardware profile is a YAML mapping (see profiles/h100-sxm.yaml)");
  reject_unknown_keys(root,
                      {"name", "compute", "memory", "kernel_overhead_s", "eager_op_s", "train_op_s",
                       "graph_kernel_overhead_s", "kernel_launch", "gpus_per_node", "intra_node", "inter_node"},
                      path, "", " in a hardware profile; the keys are ");
  HardwareProfile p;
  p.path = path;
  const YAML::Node name = root["name"];
  if (name && !name.IsScalar())
    throw InputError(path + ":" + std::to_string(name.Mark().line + 1) + ": `name` must be a string");
  p.name = name ? name.Scalar() : fs::path(path).stem().string();
  parse_compute(root, path, p);
  parse_memory_and_ops(root, path, p);
  const double gpus = positive(root, "gpus_per_node", path);
  if (gpus != std::floor(gpus) || gpus > 4096)  // also keeps the conversion to int defined
    throw InputError(path + ": `gpus_per_node` must be a whole number of devices up to 4096, not " +
                     root["gpus_per_node"].Scalar());
  p.gpus_per_node = static_cast<int>(gpus);
  p.intra_node = parse_link(root, "intra_node", path);
  p.inter_node = parse_link(root, "inter_node", path);
  if (p.compute_efficiency > 1 || p.memory_efficiency > 1)
    throw InputError(path + ": efficiencies are shares of the peak, at most 1");
  return p;
}

std::vector<std::string> shipped_profiles() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(profile_dir(), ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

HardwareProfile load_profile(const std::string& spec) {
  fs::path path = spec;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) path = profile_dir() / (spec + ".yaml");
  if (!fs::is_regular_file(path, ec)) {
    std::string names;
    for (const auto& n : shipped_profiles()) names += (names.empty() ? "" : ", ") + n;
    throw InputError("hardware profile '" + spec + "' is neither a file nor a shipped profile (" +
                     (names.empty() ? "none found in " + profile_dir().string() : names) +
                     "); pass one of those names, a YAML file, or write one with `hpcrl calibrate --out FILE`");
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), shown_path(path));
}

std::string profile_yaml(const HardwareProfile& p, const std::string& comment) {
  std::ostringstream o;
  o.precision(6);
  std::istringstream lines(comment);
  for (std::string l; std::getline(lines, l);) o << "# " << l << "\n";
  o << "name: " << p.name << "\n"
    << "compute: {peak_flops: " << p.peak_flops << ", efficiency: " << p.compute_efficiency;
  if (!p.width_rates.empty()) {
    o << ",\n          by_width: {";
    for (size_t i = 0; i < p.width_rates.size(); ++i)
      o << (i ? ", " : "") << p.width_rates[i].first << ": " << p.width_rates[i].second;
    o << "}";
  }
  o << "}\n"
    << "memory: {bandwidth: " << p.memory_bandwidth << ", efficiency: " << p.memory_efficiency
    << ", capacity: " << p.memory_capacity;
  if (p.elementwise_bandwidth_peak > 0) o << ", elementwise_bandwidth: " << p.elementwise_bandwidth_peak;
  o << "}\n"
    << "kernel_overhead_s: " << p.kernel_overhead_s << "\n";
  if (p.eager_op_s > 0) o << "eager_op_s: " << p.eager_op_s << "\n";
  if (p.train_op_s > 0) o << "train_op_s: " << p.train_op_s << "\n";
  if (p.graph_kernel_overhead_s > 0) o << "graph_kernel_overhead_s: " << p.graph_kernel_overhead_s << "\n";
  o
    << "kernel_launch: " << (p.async_launch ? "asynchronous" : "synchronous") << "\n"
    << "gpus_per_node: " << p.gpus_per_node << "\n"
    << "intra_node: " << link_yaml(p.intra_node) << "\n"
    << "inter_node: " << link_yaml(p.inter_node) << "\n";
  return o.str();
}

}  // namespace hpcrl::cost
