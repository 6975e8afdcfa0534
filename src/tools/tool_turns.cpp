// The turn handler over real tools (tool_turns.h).
#include "hpcrl/tools/tool_turns.h"

#include <chrono>

#include "hpcrl/io/tokenizer.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::tools {

ToolTurns::ToolTurns(std::vector<ToolPtr> tools, ToolCallFormat format, ToolLimits limits,
                     const io::Tokenizer& tokenizer, std::string trajectory_prefix, int64_t prompt_offset)
    : tools_(std::move(tools)),
      format_(std::move(format)),
      limits_(limits),
      tokenizer_(tokenizer),
      prefix_(std::move(trajectory_prefix)),
      prompt_offset_(prompt_offset) {
  for (const auto& t : tools_) names_.push_back(t->name());
  reply_open_ = tokenizer_.encode(format_.reply_open);
  reply_close_ = tokenizer_.encode(format_.reply_close);
  if (trace::enabled()) trace::name_lane(trace::kToolsLane, "tools");
}

ToolTurns::~ToolTurns() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& w : workers_) w.join();
}

std::string ToolTurns::turn_text(const rollout::Sample& s) const {
  size_t first = s.tokens.size();
  while (first > 0 && s.was_sampled(first - 1)) --first;
  return tokenizer_.decode(std::vector<int32_t>(s.tokens.begin() + int64_t(first), s.tokens.end()));
}

bool ToolTurns::ends_turn(const rollout::Sample& s) const {
  // The model's own last tokens, at most as many as the close tag has bytes (a
  // token is at least one byte; one special token may be the whole tag), none
  // of them a reply's: a tag inside a reply never ends a turn.
  size_t first = s.tokens.size();
  while (first > 0 && s.tokens.size() - first < format_.close.size() && s.was_sampled(first - 1)) --first;
  if (first == s.tokens.size()) return false;
  return ends_with_call(tokenizer_.decode(std::vector<int32_t>(s.tokens.begin() + int64_t(first), s.tokens.end())),
                        format_);
}

void ToolTurns::start(int64_t ticket, const rollout::Sample& s) {
  Job job;
  job.ticket = ticket;
  const int64_t prompt = prompt_keys_.empty() ? prompt_offset_ + s.prompt_index : prompt_keys_[size_t(s.prompt_index)];
  job.context.trajectory = prefix_ + "/" + std::to_string(prompt) + "/" + std::to_string(s.sample_index);
  job.context.timeout = std::chrono::milliseconds(int64_t(limits_.call_seconds * 1000));
  job.start_us = trace::now_us();
  const ParsedCall call = parse_call(turn_text(s), format_, names_);
  if (s.turns > limits_.max_turns) {
    job.ends_row = true;
  } else if (!call.error.empty()) {
    job.result = {call.error, true};
  } else {
    for (const auto& t : tools_)
      if (t->name() == call.name) job.tool = t.get();
    job.arguments = call.arguments;
    // An environment is a stage's only tool (validated), so the trajectory's first call is its episode's first step.
    if (job.tool && job.tool->environment() && s.turns == 1) {
      HPCRL_CHECK(size_t(s.prompt_index) < episodes_.size(),
                  "ToolTurns: no episode for prompt " << s.prompt_index << " of an environment's call (use_episodes)");
      job.context.reset = episodes_[size_t(s.prompt_index)];
    }
  }
  if (job.tool && job.tool->instant()) run(job);  // done now: ready at the next iteration, on any machine
  std::lock_guard<std::mutex> lock(mutex_);
  if (!job.tool || job.done) {
    done_.push_back(std::move(job));
    result_ready_.notify_one();
    return;
  }
  queue_.push_back(std::move(job));
  if (idle_ == 0 && int64_t(workers_.size()) < limits_.concurrency) workers_.emplace_back([this] { work(); });
  work_ready_.notify_one();
}

void ToolTurns::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    run(job);
    lock.lock();
    done_.push_back(std::move(job));
    result_ready_.notify_one();
  }
}

void ToolTurns::run(Job& job) const {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    job.result = job.tool->call(job.arguments, job.context);
  } catch (...) {
    job.thrown = std::current_exception();
  }
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!job.result.error && job.seconds > limits_.call_seconds)
    job.result = {"the call took " + std::to_string(job.seconds) + " s, over the limit", true};
  job.done = true;
}

std::vector<std::pair<int64_t, rollout::TurnReply>> ToolTurns::poll(bool wait) {
  std::deque<Job> ready;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wait) result_ready_.wait(lock, [this] { return !done_.empty(); });
    ready.swap(done_);
  }
  std::vector<std::pair<int64_t, rollout::TurnReply>> out;
  for (Job& job : ready) {
    if (job.thrown) std::rethrow_exception(job.thrown);
    out.emplace_back(job.ticket, reply_of(job));
  }
  return out;
}

rollout::TurnReply ToolTurns::reply_of(Job& job) {
  rollout::TurnReply reply;
  if (job.ends_row) {
    reply.finish_reason = "turns";
    return reply;
  }
  ++totals_.calls;
  totals_.seconds += job.seconds;
  trace::complete("rollout/tool", job.start_us, trace::now_us() - job.start_us, trace::kToolsLane,
                  {{"seconds", job.seconds}, {"error", job.result.error ? 1.0 : 0.0}});
  if (job.result.error) {
    ++totals_.errors;
    if (limits_.end_on_error) {
      reply.finish_reason = "tool_error";
      return reply;
    }
  }
  reply.reward = job.result.error ? 0.0 : job.result.reward;
  if (!job.result.error && job.result.done) {  // the environment ended the episode: nothing more to read
    reply.finish_reason = "done";
    return reply;
  }
  std::vector<int32_t> result = tokenizer_.encode(job.result.error ? "error: " + job.result.text : job.result.text);
  if (int64_t(result.size()) > limits_.reply_tokens) result.resize(size_t(limits_.reply_tokens));
  reply.tokens = reply_open_;
  reply.tokens.insert(reply.tokens.end(), result.begin(), result.end());
  reply.tokens.insert(reply.tokens.end(), reply_close_.begin(), reply_close_.end());
  return reply;
}

}  // namespace hpcrl::tools
