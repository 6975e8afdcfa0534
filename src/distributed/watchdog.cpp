// The communication watchdog (see watchdog.h). The calls in flight live in a
// table (the main thread and a communicator's thread may both wait); per
// group, how many calls this rank has begun, which is how another rank tells
// whether this one reached the call it waits in.
#include "hpcrl/distributed/watchdog.h"

#include <mpi.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

constexpr int kTagQuery = 7301, kTagReply = 7302;
constexpr double kAnswerWait = 5.0;  // seconds a rank's watchdog has to answer
constexpr int kReplyBytes = 512;

using Clock = std::chrono::steady_clock;

struct Call {
  std::string op, group;
  const std::vector<int>* ranks = nullptr;
  int64_t seq = 0;  // the how-many-th call on `group` this rank began
  Clock::time_point start;
};

std::mutex g_mu;
std::map<uint64_t, Call> g_calls;  // by WatchedCall id
uint64_t g_next_id = 0;
std::map<std::string, int64_t> g_begun;  // calls begun per group name
std::atomic<bool> g_on{false};
std::atomic<bool> g_quit{false};
double g_timeout = 0;
int g_rank = 0;
MPI_Comm g_comm = MPI_COMM_NULL;
std::thread g_thread;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.empty()) return "";
  bool consecutive = true;
  for (size_t i = 1; i < ranks.size(); ++i) consecutive &= ranks[i] == ranks[i - 1] + 1;
  if (consecutive && ranks.size() > 2) return fmt::format("{}-{}", ranks.front(), ranks.back());
  return fmt::format("{}", fmt::join(ranks, ","));
}

// What this rank is doing, for another rank's question about `group`:
// "<calls begun on group>\n<description>".
std::string describe_self(const std::string& group) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_begun.find(group);
  std::string state;
  for (const auto& [id, c] : g_calls)
    state += fmt::format("{}waiting in {} #{} on '{}' for {:.1f} s", state.empty() ? "" : "; ", c.op, c.seq, c.group,
                         seconds_since(c.start));
  if (state.empty()) state = "in no communication call (computing, or blocked outside MPI)";
  return fmt::format("{}\n{}", it == g_begun.end() ? 0 : it->second, state);
}

void answer_queries() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagQuery, g_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string group(size_t(n), '\0');
    MPI_Recv(group.data(), n, MPI_CHAR, st.MPI_SOURCE, kTagQuery, g_comm, MPI_STATUS_IGNORE);
    std::string reply = describe_self(group).substr(0, kReplyBytes - 1);
    MPI_Send(reply.data(), int(reply.size()), MPI_CHAR, st.MPI_SOURCE, kTagReply, g_comm);
  }
}

// Asks every other member of `c`'s group how far it got, then ends the job.
[[noreturn]] void report(const Call& c, double waited) {
  struct Peer {
    int rank;
    MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    char buf[kReplyBytes] = {};
    bool answered = false;
  };
  std::vector<Peer> peers;
  for (int r : *c.ranks)
    if (r != g_rank) peers.push_back(Peer{r});
  for (auto& p : peers) {
    MPI_Isend(c.group.data(), int(c.group.size()), MPI_CHAR, p.rank, kTagQuery, g_comm, &p.send);
    MPI_Irecv(p.buf, kReplyBytes, MPI_CHAR, p.rank, kTagReply, g_comm, &p.recv);
  }
  const auto asked = Clock::now();
  size_t answered = 0;
  while (answered < peers.size() && seconds_since(asked) < kAnswerWait) {
    answer_queries();  // the others may be asking this rank at the same time
    for (auto& p : peers) {
      int done = 0;
      if (!p.answered && MPI_Test(&p.recv, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        p.answered = true;
        ++answered;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Point-to-point calls have no common count: there the peers' states speak for themselves.
  const bool p2p = c.op == "send" || c.op == "recv";
  std::vector<int> missing;
  std::string details;
  for (const auto& p : peers) {
    if (!p.answered) {
      missing.push_back(p.rank);
      details += fmt::format("; rank {}: no answer within {:.0f} s (stopped, e.g. SIGSTOP, or dead)", p.rank,
                             kAnswerWait);
      continue;
    }
    const std::string reply(p.buf, strnlen(p.buf, sizeof p.buf));
    const size_t nl = reply.find('\n');
    const int64_t begun = std::strtoll(reply.c_str(), nullptr, 10);
    const std::string state = nl == std::string::npos ? "" : reply.substr(nl + 1);
    if (p2p) {
      details += fmt::format("; rank {} is {}", p.rank, state);
      continue;
    }
    if (begun >= c.seq) continue;  // it reached this call (or a later one): waiting with us
    missing.push_back(p.rank);
    details += fmt::format("; rank {}: has begun {} calls on this group, not this one; it is {}", p.rank, begun, state);
  }
  std::string who = fmt::format("rank(s) {} did not arrive", fmt::join(missing, ","));
  if (missing.empty())
    who = p2p ? "its peer answered" : "every rank answered that it reached the call (the transport itself is stuck)";
  abort_job(fmt::format("communication watchdog: {} #{} on group '{}' (world ranks {}) has waited {:.1f} s, longer "
                        "than run.comm_timeout_s = {}; {}{}. Raise run.comm_timeout_s (0 = off) if ranks legitimately "
                        "work this long apart (an evaluation or a checkpoint on some ranks only)",
                        c.op, c.seq, c.group, ranks_text(*c.ranks), waited, g_timeout, who, details),
            kExitRuntime);
}

void loop() {
  while (!g_quit.load()) {
    answer_queries();
    std::optional<std::pair<Call, double>> late;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      for (const auto& [id, c] : g_calls) {
        const double waited = seconds_since(c.start);
        if (waited > g_timeout) late.emplace(c, waited);
      }
    }
    if (late) report(late->first, late->second);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void start_watchdog(double timeout_s) {
  if (g_on.load() || timeout_s <= 0) return;
  const auto& w = world();
  if (w.size < 2) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  g_rank = w.rank;
  g_timeout = timeout_s;
  g_quit.store(false);
  g_on.store(true);
  g_thread = std::thread(loop);
}

void stop_watchdog() {
  if (!g_on.load()) return;
  g_quit.store(true);
  if (g_thread.joinable()) g_thread.join();
  g_on.store(false);
  MPI_Comm_free(&g_comm);
}

WatchedCall::WatchedCall(const char* op, const std::string& group, const std::vector<int>& ranks) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_mu);
  Call c;
  c.op = op;
  c.group = group;
  c.ranks = &ranks;
  c.seq = ++g_begun[group];
  c.start = Clock::now();
  id_ = ++g_next_id;
  g_calls[id_] = std::move(c);
}

WatchedCall::~WatchedCall() {
  if (id_ == 0) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.erase(id_);
}

}  // namespace hpcrl::dist
