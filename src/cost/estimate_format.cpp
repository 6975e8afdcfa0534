// Lengths from a finished run, and the printed forms of an estimate (stage_estimate.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "hpcrl/cost/stage_estimate.h"
#include "hpcrl/util/error.h"

namespace hpcrl::cost {

namespace {
double number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
}  // namespace

std::map<int, Shapes> measured_shapes(const std::string& run_dir, const config::PipelineConfig& cfg) {
  const std::string path = run_dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) throw InputError("--from-run: no " + path + " (give the directory of a run that wrote metrics)");
  struct Sums {
    double n = 0, tokens = 0, response = 0, max_response = 0, row = 0, max_row = 0, rows_n = 0;
    double calls = 0, call_seconds = 0, reply_tokens = 0;  // tools: per response, per call (summed over lines)
  };
  std::map<int, Sums> sums;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw InputError(path + ":" + std::to_string(line_no) + ": not a metrics line (one JSON object per line)");
    const int stage = j.value("stage_index", -1);
    const double seconds = number(j, "seconds/iteration") + number(j, "seconds/step");
    if (stage < 0 || stage >= int(cfg.stages.size()) || number(j, "tokens_per_s") <= 0 || seconds <= 0) continue;
    Sums& s = sums[stage];
    s.n += 1;
    s.tokens += number(j, "tokens_per_s") * seconds / double(cfg.stages[size_t(stage)].sequences_per_step());
    s.response += number(j, "response_len/mean");
    s.calls += number(j, "tools/calls");
    s.call_seconds += number(j, "seconds/tool_call");
    s.reply_tokens += number(j, "tools/calls") > 0 ? number(j, "tools/reply_tokens") / number(j, "tools/calls") : 0;
    s.max_response += number(j, "response_len/max");
    if (number(j, "seq_len/mean") > 0) {
      s.rows_n += 1;
      s.row += number(j, "seq_len/mean");
      s.max_row += number(j, "seq_len/max");
    }
  }
  std::map<int, Shapes> out;
  for (const auto& [stage, s] : sums) {
    Shapes sh;
    sh.source = path;
    const double per_sequence = s.tokens / s.n, response = s.response / s.n;
    if (response > 0) {
      sh.response = response;
      sh.max_response = s.max_response / s.n;
      sh.prompt = std::max(1.0, per_sequence - response);
    } else if (s.rows_n > 0) {
      sh.sequence = s.row / s.rows_n;
      sh.max_sequence = s.max_row / s.rows_n;
    } else {  // a run from before seq_len was recorded: tokens_per_s counts the response tokens only
      sh.sequence = per_sequence;
    }
    sh.tools = {s.calls / s.n, s.call_seconds / s.n, s.reply_tokens / s.n};
    out[stage] = sh;
  }
  return out;
}

std::string estimate_text(const std::vector<StageEstimate>& est, const HardwareProfile& hw) {
  std::ostringstream o;
  o << "estimate on " << hw.name << " (" << hw.path << "): " << fmt("%.3g", hw.flops()) << " FLOP/s, "
    << fmt("%.3g", hw.bandwidth()) << " B/s achievable, " << fmt("%.3g", hw.op_seconds()) << " s per op ("
    << (hw.eager_op_s > 0 ? "eager_op_s, measured end to end" : "kernel_overhead_s") << "), "
    << fmt("%.3g", hw.train_op_seconds()) << " s per training op ("
    << (hw.train_op_s > 0 ? "train_op_s" : "as other ops") << "); seconds per rank of each role\n";
  for (const auto& e : est) {
    o << "\n" << e.stage << ": " << fmt("%.4g", e.seconds) << " s per " << e.unit << " × " << e.steps << " = "
      << fmt("%.4g", e.seconds * e.steps) << " s  [" << e.composition << "]\n";
    if (e.response > 0)
      o << "  lengths: prompt " << e.prompt << ", response " << e.response << " (mean) tokens; training rows of "
        << e.row << " tokens\n";
    else
      o << "  lengths: sequence " << e.sequence << " tokens (mean); rows padded to " << e.row << " tokens\n";
    if (e.engine.decode_graphs)
      o << "  decode: each step one replayed CUDA graph (--decode-graphs), " << fmt("%.3g", hw.graph_kernel_overhead_s)
        << " s a kernel\n";
    if (e.engine.partial_rollouts)
      o << "  rollout: responses running at a weight sync finish in the next iteration (--partial-rollouts, or "
           "the stage's async.partial_rollouts): no tail decoded alone\n";
    if (e.tools.calls > 0)
      o << "  tools: " << fmt("%.3g", e.tools.calls) << " calls a response of " << fmt("%.3g", e.tools.seconds)
        << " s each (--tool-calls, --tool-seconds, --from-run; else the stage's max_turns and 0 s), replies of "
        << fmt("%.3g", e.tools.reply_tokens) << " tokens: the calls add " << fmt("%.4g", e.tool_wait_s)
        << " s of decode (the rows parked in their slots)\n";
    if (e.eval.prompts > 0)
      o << "  evaluation: " << e.eval.prompts << " prompts x " << e.eval.samples_per_prompt << " sample(s), up to "
        << e.eval.max_new_tokens << " new tokens each: " << fmt("%.4g", e.eval_seconds()) << " s each (every "
        << "response at the cap) x " << e.eval.evaluations << " = " << fmt("%.4g", e.eval_seconds() * double(e.eval.evaluations))
        << " s beside the " << e.unit << "s\n";
    if (e.unit == "iteration")
      o << "  G " << fmt("%.4g", e.generation_s) << " s, A " << fmt("%.4g", e.aux_s) << " s, T "
        << fmt("%.4g", e.train_s) << " s, weight sync " << fmt("%.4g", e.sync_s) << " s\n";
    o << "  | span | role | part | seconds | bound | matmul s | element-wise s | launches s | GFLOP | GB | "
         "element-wise GB | ops | comm GB |\n";
    for (const auto& s : e.spans)
      o << "  | " << s.name << " | " << s.role << " | " << s.part << " | " << fmt("%.4g", s.cost.seconds()) << " | "
        << s.cost.bound() << " | " << fmt("%.3g", s.cost.roofline_s) << " | " << fmt("%.3g", s.cost.elementwise_s)
        << " | " << fmt("%.3g", s.cost.overhead_s) << " | " << fmt("%.4g", s.cost.flops / 1e9) << " | "
        << fmt("%.4g", s.cost.bytes / 1e9) << " | " << fmt("%.4g", s.cost.elementwise_bytes / 1e9) << " | "
        << fmt("%.0f", s.cost.ops) << " | " << fmt("%.4g", s.cost.comm_bytes / 1e9) << " |\n";
  }
  return o.str();
}

nlohmann::json estimate_json(const std::vector<StageEstimate>& est, const HardwareProfile& hw) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& e : est) {
    nlohmann::json spans = nlohmann::json::array();
    for (const auto& s : e.spans)
      spans.push_back({{"name", s.name}, {"role", s.role}, {"part", s.part}, {"seconds", s.cost.seconds()},
                       {"bound", s.cost.bound()}, {"flops", s.cost.flops}, {"bytes", s.cost.bytes},
                       {"comm_bytes", s.cost.comm_bytes}, {"compute_s", s.cost.compute_s},
                       {"memory_s", s.cost.memory_s}, {"roofline_s", s.cost.roofline_s},
                       {"elementwise_s", s.cost.elementwise_s}, {"elementwise_bytes", s.cost.elementwise_bytes},
                       {"ops", s.cost.ops}, {"overhead_s", s.cost.overhead_s}, {"comm_s", s.cost.comm_s},
                       {"bubble_s", s.cost.bubble_s}, {"first_rank", s.first_rank}, {"ranks", s.ranks}});
    stages.push_back({{"stage", e.stage}, {"unit", e.unit}, {"seconds", e.seconds}, {"steps", e.steps},
                      {"total_seconds", e.seconds * e.steps}, {"composition", e.composition},
                      {"generation_s", e.generation_s}, {"aux_s", e.aux_s}, {"train_s", e.train_s},
                      {"weight_sync_s", e.sync_s}, {"prompt_tokens", e.prompt}, {"response_tokens", e.response},
                      {"sequence_tokens", e.sequence}, {"row_tokens", e.row},
                      {"decode_graphs", e.engine.decode_graphs}, {"partial_rollouts", e.engine.partial_rollouts},
                      {"tools", {{"calls", e.tools.calls}, {"seconds_per_call", e.tools.seconds},
                                 {"reply_tokens", e.tools.reply_tokens}, {"wait_s", e.tool_wait_s}}},
                      {"evaluation", {{"prompts", e.eval.prompts}, {"samples_per_prompt", e.eval.samples_per_prompt},
                                      {"max_new_tokens", e.eval.max_new_tokens}, {"evaluations", e.eval.evaluations},
                                      {"seconds_each", e.eval_seconds()},
                                      {"total_seconds", e.eval_seconds() * double(e.eval.evaluations)}}},
                      {"spans", spans}});
  }
  return {{"profile", {{"name", hw.name}, {"path", hw.path}, {"flops", hw.flops()}, {"bandwidth", hw.bandwidth()},
                       {"elementwise_bandwidth", hw.elementwise_bandwidth()}, {"kernel_overhead_s", hw.kernel_overhead_s},
                       {"eager_op_s", hw.eager_op_s > 0 ? nlohmann::json(hw.eager_op_s) : nlohmann::json()},
                       {"op_s", hw.op_seconds()},
                       {"train_op_s", hw.train_op_s > 0 ? nlohmann::json(hw.train_op_s) : nlohmann::json()},
                       {"kernel_launch", hw.async_launch ? "asynchronous" : "synchronous"},
                       {"memory_capacity", hw.memory_capacity}}},
          {"stages", stages}};
}

}  // namespace hpcrl::cost
