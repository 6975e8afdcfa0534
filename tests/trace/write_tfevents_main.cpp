// Writes one TensorBoard event file with TensorBoardWriter, for
// tensorboard_reader_check.sh to read back with Google's protobuf library.
//
//   write_tfevents DIR > inputs.jsonl
//
// Prints every scalar it hands the writer as {"tag", "step", "input"}: the value
// as given (a double, or "nan"/"inf"/"-inf"), before float32 rounding or
// skipping, so the checker applies those rules itself instead of trusting this
// program's idea of them. The event file's path goes to stderr.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hpcrl/trace/tensorboard.h"

namespace {

using Metrics = std::vector<std::pair<std::string, double>>;

void write(hpcrl::trace::TensorBoardWriter& w, const std::string& stage, int64_t step, const Metrics& metrics) {
  w.write(stage, step, metrics);
  for (const auto& [name, value] : metrics) {
    nlohmann::ordered_json line;
    line["tag"] = stage.empty() ? name : stage + "/" + name;
    line["step"] = step;
    if (std::isnan(value)) line["input"] = "nan";
    else if (std::isinf(value)) line["input"] = value > 0 ? "inf" : "-inf";
    else line["input"] = value;  // nlohmann prints doubles round-trip exact
    std::cout << line.dump() << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_tfevents DIR\n";
    return 2;
  }
  try {
    hpcrl::trace::TensorBoardWriter w(argv[1], 0);
    const double inf = std::numeric_limits<double>::infinity();
    // A short learning curve, as a stage reports it.
    for (int step = 1; step <= 50; ++step)
      write(w, "sft", step, {{"loss", 2.0 / step}, {"lr", 1e-3 * step / 50}, {"seconds/sft/step", 0.01 * step}});
    // Values float32 rounds (0.1, 1/3), must keep exactly (0, -0, FLT_MAX) or flushes
    // to a subnormal or zero (1e-45, 1e-46); values the writer must skip (NaN, inf,
    // just above FLT_MAX).
    write(w, "grpo", 0,
          {{"reward/mean", 0.1}, {"third", 1.0 / 3}, {"zero", 0.0}, {"negzero", -0.0}, {"max", FLT_MAX},
           {"negmax", -static_cast<double>(FLT_MAX)}, {"subnormal", 1e-45}, {"underflow", 1e-46},
           {"kl", std::nan("")}, {"inf", inf}, {"neginf", -inf}, {"overflow", 3.4028235e38}});
    // Steps at int64's edges (negative steps take ten varint bytes), a UTF-8 tag,
    // and a metric with no stage.
    write(w, "grpo", -1, {{"reward/std", -2.75}});
    write(w, "grpo", int64_t{1} << 40, {{"eval/accuracy", 0.675}});
    write(w, "eval", std::numeric_limits<int64_t>::max(), {{"naïve/ρ", 12345.678}});
    write(w, "", 7, {{"plain", 1e20}});
    w.flush();
    std::cerr << w.path() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "write_tfevents: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
