// How much of a slow tool's time multi-turn generation hides behind the other
// rows' decoding (docs/tools.md). 256 rows of the quickstart's tiny model
// (random weights) in 256 slots, each making one call at a step of its own
// (spread over its first 32 tokens, as calls land in real trajectories) whose
// 4-token reply comes back after `sleep` ms on a worker thread; the same run
// with the reply at once is the baseline of the same process:
//   hidden = 1 − (T_sleep − T_instant) / (calls · sleep)
// (1: the calls cost no time at all; 0: the engine waited for every one in
// turn). Both runs generate the same tokens (the draws count the model's own
// tokens only), so the difference is the waiting. Also: calls per second over
// the sleeping run. Medians of --rounds runs.
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/benchmarks/rollout/bench_tool_overlap [--rows 256]
//       [--sleep-ms 100] [--tokens 64] [--rounds 3]
#include <torch/utils.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../bench_timing.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/config/model_arch.h"
#include "hpcrl/rollout/engine.h"

namespace {

using namespace hpcrl;

// Row (p, 0) ends a turn at its token 1 + (7p mod 32); the reply (4 tokens) is ready `sleep` later.
class SleepingCalls : public rollout::TurnHandler {
 public:
  explicit SleepingCalls(std::chrono::milliseconds sleep) : sleep_(sleep) {}
  bool ends_turn(const rollout::Sample& s) const override {
    return s.turns == 0 && int64_t(s.tokens.size()) == 1 + (7 * s.prompt_index) % 32;
  }
  void start(int64_t ticket, const rollout::Sample&) override {
    const auto due = std::chrono::steady_clock::now() + sleep_;
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.emplace(ticket, std::async(std::launch::async, [due] {
                     std::this_thread::sleep_until(due);
                     return rollout::TurnReply{{40, 41, 42, 43}, ""};
                   }));
  }
  std::vector<std::pair<int64_t, rollout::TurnReply>> poll(bool wait) override {
    std::vector<std::pair<int64_t, rollout::TurnReply>> ready;
    std::lock_guard<std::mutex> lock(mutex_);
    while (ready.empty()) {
      for (auto it = calls_.begin(); it != calls_.end();) {
        if (it->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          ready.emplace_back(it->first, it->second.get());
          it = calls_.erase(it);
        } else {
          ++it;
        }
      }
      if (!wait || calls_.empty()) break;
      if (ready.empty()) calls_.begin()->second.wait();
    }
    return ready;
  }

 private:
  std::chrono::milliseconds sleep_;
  std::mutex mutex_;
  std::map<int64_t, std::future<rollout::TurnReply>> calls_;
};

struct Run {
  double seconds = 0;
  int64_t calls = 0, decode_steps = 0, during_calls = 0;
  double wait_seconds = 0;
};

Run run_once(const std::shared_ptr<model::DecoderModel>& m, int64_t rows, int64_t tokens, std::chrono::milliseconds sleep) {
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t p = 0; p < rows; ++p) prompts.push_back({int32_t(3 + p % 200), int32_t(5 + p % 97), 7, 9});
  rollout::SamplingParams params;
  params.max_new_tokens = tokens;
  params.seed = 1;
  rollout::EngineOptions options;
  options.max_batch = rows;
  rollout::Engine engine(m, nullptr, options);
  SleepingCalls calls(sleep);
  rollout::GenerationCall call;
  for (int64_t p = 0; p < rows; ++p) call.samples.push_back({p, 0});
  call.turns = &calls;
  const auto t0 = bench::Clock::now();
  engine.run(prompts, call, params);
  Run r;
  r.seconds = bench::since(t0);
  const auto& st = engine.last_stats();
  r.calls = st.turn_calls;
  r.decode_steps = st.decode_steps;
  r.during_calls = st.decode_steps_during_calls;
  r.wait_seconds = st.call_wait_seconds;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 256, sleep_ms = 100, tokens = 64, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::stoll(argv[i + 1]);
    if (a == "--rows") rows = v;
    else if (a == "--sleep-ms") sleep_ms = v;
    else if (a == "--tokens") tokens = v;
    else if (a == "--rounds") rounds = v;
    else {
      std::fprintf(stderr, "usage: %s [--rows N] [--sleep-ms N] [--tokens N] [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  torch::NoGradGuard no_grad;
  model::ModelOptions o;
  o.seed = 1;
  auto m = std::make_shared<model::DecoderModel>(model_arch_preset("tiny"), parallel::ParallelContext{}, o);
  m->eval();
  run_once(m, rows, tokens, std::chrono::milliseconds(0));  // warm-up
  std::vector<double> instant, sleeping, hidden;
  Run last;
  for (int64_t k = 0; k < rounds; ++k) {
    const Run a = run_once(m, rows, tokens, std::chrono::milliseconds(0));
    last = run_once(m, rows, tokens, std::chrono::milliseconds(sleep_ms));
    instant.push_back(a.seconds);
    sleeping.push_back(last.seconds);
    hidden.push_back(1.0 - (last.seconds - a.seconds) / (double(last.calls) * double(sleep_ms) / 1000.0));
  }
  std::printf("| rows | tool ms | calls | instant s | sleeping s | hidden | calls/s | decode steps (during calls) | "
              "engine waited s |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  std::printf("| %lld | %lld | %lld | %.3f | %.3f | %.1f %% | %.0f | %lld (%lld) | %.3f |\n", (long long)rows,
              (long long)sleep_ms, (long long)last.calls, bench::median(instant), bench::median(sleeping),
              100.0 * bench::median(hidden), double(last.calls) / bench::median(sleeping),
              (long long)last.decode_steps, (long long)last.during_calls, last.wait_seconds);
  return 0;
}
