// The `command` reward against a real child process (command_reward_helper,
// built beside this test): scores in order across batches, metadata and
// UTF-8 handling, every failure kind with the exact parts of its message
// (reward, command, sample index, offending line, stderr tail), the
// per-answer timeout, SIGPIPE safety, a 10k-sample batch that would deadlock
// a write-everything-then-read implementation, and reaping (no zombies).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hpcrl/reward/command_reward.h"
#include "hpcrl/util/error.h"
#include "reward/command_reply.h"

using namespace hpcrl;
using namespace hpcrl::reward;

namespace {

using Clock = std::chrono::steady_clock;

CommandReward helper(const std::string& mode, long bad = -1, double timeout_s = 10) {
  std::vector<std::string> argv{HPCRL_REWARD_HELPER, mode};
  if (bad >= 0) argv.push_back(std::to_string(bad));
  return CommandReward({"judge", argv, timeout_s});
}

// Samples whose response equals the answer exactly when `right[i]`.
struct Batch {
  std::vector<std::string> responses, answers;
  std::vector<RewardSample> samples;
  Batch(size_t n, const std::vector<bool>& right, size_t response_bytes = 8) {
    for (size_t i = 0; i < n; ++i) {
      std::string r = "resp-" + std::to_string(i) + std::string(response_bytes, 'r') + " \"quoted\"\n\\";
      responses.push_back(r);
      answers.push_back(right[i % right.size()] ? r : r + "!");
    }
    for (size_t i = 0; i < n; ++i) samples.push_back({"What is 2+2?", responses[i], answers[i]});
  }
};

// The message of the exception `fn` throws, which must be of type E.
template <class E, class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Not our child any more (reaped) and no such process (not even a zombie).
void expect_reaped(int pid) {
  ASSERT_GT(pid, 0);
  int status = 0;
  errno = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

}  // namespace

TEST(CommandReward, ScoresExactMatchesInOrderAcrossBatchesWithOneProgram) {
  CommandReward r = helper("exact");
  EXPECT_EQ(r.pid(), -1);  // not started until it scores
  Batch a(6, {true, false, false, true, true, false});
  EXPECT_EQ(r.score(a.samples), (std::vector<double>{1, 0, 0, 1, 1, 0}));
  const int pid = r.pid();
  EXPECT_GT(pid, 0);
  EXPECT_EQ(r.next_index(), 6);
  // The helper echoes "index"; a wrong continuation (restarting at 0) would be an error.
  Batch b(3, {false, true});
  EXPECT_EQ(r.score(b.samples), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(r.next_index(), 9);
  EXPECT_EQ(r.pid(), pid);  // started once
  EXPECT_TRUE(r.score({}).empty());
}

TEST(CommandReward, StringCommandRunsThroughShell) {
  const std::string script = std::string("exec '") + HPCRL_REWARD_HELPER + "' exact";
  CommandReward r({"judge", {"sh", "-c", script}, 10});
  EXPECT_EQ(r.command_line(), script);
  Batch a(4, {true, false});
  EXPECT_EQ(r.score(a.samples), (std::vector<double>{1, 0, 1, 0}));
}

TEST(CommandReward, SendsMetadataAndReplacesInvalidUtf8) {
  CommandReward m = helper("metadata");
  nlohmann::json meta = {{"weight", 0.25}, {"example", 7}};
  std::vector<RewardSample> one{{"p", "r", "a", &meta}};
  EXPECT_EQ(m.score(one), std::vector<double>{0.25});

  // "\xff" is not UTF-8: it is sent as U+FFFD, so it equals an answer written as U+FFFD.
  CommandReward e = helper("exact");
  std::vector<RewardSample> bytes{{"p", "x\xff", "x\xEF\xBF\xBD"}};
  EXPECT_EQ(e.score(bytes), std::vector<double>{1});
}

TEST(CommandReward, CrashMidStreamNamesSampleStatusAndStderr) {
  CommandReward r = helper("crash", 5);
  Batch a(10, {true});
  std::string msg = error_of<RuntimeError>([&] { r.score(a.samples); });
  EXPECT_TRUE(contains(msg, "rewards.judge: the reward program `")) << msg;
  EXPECT_TRUE(contains(msg, HPCRL_REWARD_HELPER)) << msg;
  EXPECT_TRUE(contains(msg, "exited with status 3 before answering sample 5 (5 of 10 samples of this batch answered)"))
      << msg;
  EXPECT_TRUE(contains(msg, "sample 5 was: {\"prompt\": \"What is 2+2?\", \"response\": \"resp-5")) << msg;
  EXPECT_TRUE(contains(msg, "\"index\": 5}")) << msg;
  EXPECT_TRUE(contains(msg, "its stderr (last lines):\n    | starting sample 5\n    | boom at sample 5")) << msg;
  EXPECT_TRUE(contains(msg, "fix: ")) << msg;
  EXPECT_EQ(r.pid(), -1);
  std::string again = error_of<RuntimeError>([&] { r.score(a.samples); });
  EXPECT_TRUE(contains(again, "was stopped after an earlier error")) << again;
}

TEST(CommandReward, MalformedAnswerIsAnInputErrorQuotingTheLine) {
  CommandReward r = helper("malformed", 2);
  Batch a(4, {true});
  const int64_t before = r.next_index();
  std::string msg = error_of<InputError>([&] { r.score(a.samples); });
  EXPECT_TRUE(contains(msg, "answered sample 2 with a line that is not JSON\n  line: not json\n  sample 2 was: {"))
      << msg;
  EXPECT_TRUE(contains(msg, "{\"score\": <number>} per input line")) << msg;
  EXPECT_EQ(r.next_index(), before);  // a failed batch scores nothing
}

TEST(CommandReward, BareNumberAndNonNumericScoreAreRejected) {
  Batch a(3, {true});
  CommandReward bare = helper("bare", 1);
  std::string m1 = error_of<InputError>([&] { bare.score(a.samples); });
  EXPECT_TRUE(contains(m1, "answered sample 1 with a line that is a bare number; write it as {\"score\": 1}")) << m1;
  CommandReward text = helper("string_score", 0);
  std::string m2 = error_of<InputError>([&] { text.score(a.samples); });
  EXPECT_TRUE(contains(m2, "answered sample 0 with a line that has a non-numeric \"score\" (\"high\")")) << m2;
  EXPECT_TRUE(contains(m2, "line: {\"score\": \"high\"}")) << m2;
}

TEST(CommandReward, StrayStdoutLinesAreCaught) {
  Batch a(3, {true});
  CommandReward banner = helper("banner");
  std::string m1 = error_of<InputError>([&] { banner.score(a.samples); });
  EXPECT_TRUE(contains(m1, "answered sample 0 with a line that is not JSON\n  line: loading model...")) << m1;
  // Sample 0 answered twice: the extra line would become sample 1's score; its echoed index (or its
  // arrival before sample 1 was sent) gives it away.
  CommandReward twice = helper("twice", 0);
  std::string m2 = error_of<InputError>([&] { twice.score(a.samples); });
  EXPECT_TRUE(contains(m2, "with a line that carries \"index\": 0, but the sample it answers is index 1") ||
              contains(m2, "printed a line before it was sent sample 1"))
      << m2;
}

TEST(CommandReward, TimeoutIsPerAnswerAndStopsTheProgram) {
  CommandReward r = helper("hang", 2, 0.5);
  Batch a(4, {true});
  auto t0 = Clock::now();
  std::string msg = error_of<RuntimeError>([&] { r.score(a.samples); });
  double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(sec, 0.5);
  EXPECT_LT(sec, 4.0);  // 0.5 s wait + SIGTERM, not the 3 s grace of a normal stop
  EXPECT_TRUE(contains(msg, "gave no answer for sample 2 within timeout_s = 0.5 s (2 of 4 samples of this batch "
                            "answered)"))
      << msg;
  EXPECT_TRUE(contains(msg, "| thinking hard about sample 2")) << msg;
  EXPECT_TRUE(contains(msg, "flushes stdout")) << msg;
  EXPECT_TRUE(contains(msg, "raise rewards.judge.timeout_s")) << msg;
  EXPECT_EQ(r.pid(), -1);
}

// 1e10 s is past steady_clock's nanosecond range from now (int64: ~9.2e9 s): unclamped, the
// deadline wrapped into the past and every sample timed out at once.
TEST(CommandReward, ATimeoutBeyondTheClocksRangeMeansNever) {
  CommandReward r = helper("exact", -1, 1e10);
  Batch a(3, {true, false, true});
  EXPECT_EQ(r.score(a.samples), (std::vector<double>{1, 0, 1}));
}

TEST(CommandReward, ProgramThatExitsAtOnceIsAnErrorNotSigpipe) {
  // 2000 × 8 KiB requests overflow the pipe, so writing after the exit hits EPIPE:
  // without the SIGPIPE guard this test process would die.
  CommandReward r = helper("exit_now");
  Batch a(2000, {true}, 8192);
  std::string msg = error_of<RuntimeError>([&] { r.score(a.samples); });
  EXPECT_TRUE(contains(msg, "exited with status 0 before answering sample 0 (0 of 2000 samples")) << msg;
  EXPECT_TRUE(contains(msg, "its stderr: (nothing)")) << msg;
  sigset_t pending, mask;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 0);  // the thread's mask is restored
}

TEST(CommandReward, LargeBatchStreamsWithoutDeadlock) {
  // 10k requests of ~4 KiB (40 MB) against 10k answers of ~2 KiB (20 MB): both pipes fill up many
  // times over, so writing everything before reading anything would block forever.
  CommandReward r = helper("padded", -1, 20);
  std::vector<bool> pattern{true, false, true, true, false, false, true};
  Batch a(10000, pattern, 4096);
  auto t0 = Clock::now();
  std::vector<double> s = r.score(a.samples);
  double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(s.size(), 10000u);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], pattern[i % pattern.size()] ? 1.0 : 0.0) << i;
  EXPECT_LT(sec, 60.0);
  std::printf("10000 samples x 4 KiB through the helper: %.2f s\n", sec);
}

TEST(CommandReward, MissingProgramIsAnInputError) {
  Batch a(1, {true});
  CommandReward path({"judge", {"/nonexistent/dir/score"}, 10});
  std::string m1 = error_of<InputError>([&] { path.score(a.samples); });
  EXPECT_TRUE(contains(m1, "rewards.judge.command: cannot start '/nonexistent/dir/score': no such file")) << m1;
  CommandReward bare({"judge", {"hpcrl-no-such-program-xyz"}, 10});
  std::string m2 = error_of<InputError>([&] { bare.score(a.samples); });
  EXPECT_TRUE(contains(m2, "cannot start 'hpcrl-no-such-program-xyz': not found on PATH")) << m2;
  EXPECT_TRUE(contains(error_of<InputError>([] { CommandReward({"judge", {}, 10}); }), "rewards.judge.command: empty"));
  EXPECT_TRUE(contains(error_of<InputError>([] { CommandReward({"judge", {"x"}, 0}); }), "rewards.judge.timeout_s: 0"));
}

TEST(CommandReward, DestructionReapsTheProgram) {
  int pid = -1;
  {
    CommandReward r = helper("exact");
    Batch a(2, {true});
    r.score(a.samples);
    pid = r.pid();
    ASSERT_GT(pid, 0);
  }
  expect_reaped(pid);
}

namespace {
// Running or sleeping, not gone or a zombie that nothing has reaped yet.
bool process_runs(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}
}  // namespace

TEST(CommandReward, WhatTheProgramStartedInTheBackgroundEndsWithIt) {
  // sh starts a sleep in the background (in the program's process group), writes its pid, and
  // becomes the judge; the judge exits at EOF, and the sleep must not outlive the reward.
  const std::string pidfile = testing::TempDir() + "/background.pid";
  std::vector<std::string> argv{"sh", "-c",
                                "sleep 300 & echo $! > '" + pidfile + "'; exec '" + HPCRL_REWARD_HELPER + "' exact"};
  {
    CommandReward r({"judge", argv, 10});
    Batch a(1, {true});
    EXPECT_EQ(r.score(a.samples), std::vector<double>{1});
  }
  int background = 0;
  std::ifstream(pidfile) >> background;
  ASSERT_GT(background, 0);
  for (int i = 0; i < 200 && process_runs(background); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(process_runs(background)) << "sleep " << background << " outlived the reward program";
  ::kill(background, SIGKILL);  // leave nothing behind if the check failed
}

TEST(CommandReward, ProgramIgnoringEofIsTerminatedAfterTheGrace) {
  // The helper exits on EOF, then the shell runs sleep, which never reads stdin: the destructor
  // waits its 3 s grace, then SIGTERMs the process group, and reaps.
  int pid = -1;
  auto t0 = Clock::now();
  {
    std::vector<std::string> argv{"sh", "-c", std::string("'") + HPCRL_REWARD_HELPER + "' exact; exec sleep 60"};
    CommandReward r({"judge", argv, 10});
    Batch a(1, {true});
    EXPECT_EQ(r.score(a.samples), std::vector<double>{1});
    pid = r.pid();
  }
  double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(sec, 3.0);
  EXPECT_LT(sec, 7.0);
  expect_reaped(pid);
}

TEST(CommandReward, StdoutFloodWithoutNewlineStopsAtOneMiB) {
  // An answer line may hold at most 1 MiB: a program printing without end is
  // stopped there, with the start of what it printed, not read into memory.
  CommandReward r = helper("flood", 1);
  Batch a(3, {true});
  std::string msg = error_of<InputError>([&] { r.score(a.samples); });
  EXPECT_TRUE(contains(msg, "bytes without a newline while answering sample 1")) << msg.substr(0, 400);
  EXPECT_TRUE(contains(msg, "start of that output: xxxx")) << msg.substr(0, 400);
  EXPECT_LT(msg.size(), 4096u);  // the message quotes a bounded start of the flood
  EXPECT_EQ(r.pid(), -1);
}

TEST(CommandReward, StderrFloodIsDrainedAndKeptBounded) {
  // 64 MiB on stderr while answering: drained (the program never blocks on a
  // full pipe) and kept as a bounded tail, so scoring goes on and memory stays flat.
  auto rss_kb = [] {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0L;
  };
  CommandReward r = helper("flood_stderr", 1);
  Batch a(3, {true, false, true});
  const long before = rss_kb();
  auto scores = r.score(a.samples);
  const long grown = rss_kb() - before;
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_EQ(scores[0], 1.0);  // answers still arrive in order after the flood
  EXPECT_EQ(scores[1], 0.0);
  EXPECT_EQ(scores[2], 1.0);
  EXPECT_LT(grown, 16 * 1024) << "RSS grew by " << grown << " KiB while the program wrote 64 MiB to stderr";
}

// A score of ±1.7e308 is finite, but the group's statistics square it (inf, then NaN): before,
// the run stopped later at a non-finite gradient blamed on the learning rate.
TEST(CommandReply, AScoreBeyondOneE30IsRefusedNamingIt) {
  double score = 0;
  EXPECT_NE(reward::reply_problem(R"({"score": -1.7e308})", 0, score).find("has a score of -1.7e+308, beyond ±1e30"),
            std::string::npos);
  EXPECT_EQ(reward::reply_problem(R"({"score": 1e30})", 0, score), "");
  EXPECT_EQ(score, 1e30);
}

// A `setsid` process is in a session and process group of its own, so the group kill misses
// it; before, it outlived hpcrl. Re-parented to this process (a child subreaper) once the
// program exits, it ends when the reward does.
TEST(CommandReward, WhatTheProgramStartedInASessionOfItsOwnEndsWithIt) {
  const std::string pidfile = testing::TempDir() + "/setsid.pid";
  std::vector<std::string> argv{
      "sh", "-c", "setsid sleep 300 & echo $! > '" + pidfile + "'; exec '" + HPCRL_REWARD_HELPER + "' exact"};
  {
    CommandReward r({"judge", argv, 10});
    Batch a(1, {true});
    EXPECT_EQ(r.score(a.samples), std::vector<double>{1});
  }
  int detached = 0;
  std::ifstream(pidfile) >> detached;
  ASSERT_GT(detached, 0);
  for (int i = 0; i < 200 && process_runs(detached); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(process_runs(detached)) << "setsid sleep " << detached << " outlived the reward program";
  ::kill(detached, SIGKILL);
}
