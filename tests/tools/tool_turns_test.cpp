// The turn handler over real tools: a call's text to the reply's tokens (the
// template's wrapping around the result, cut to the limit), errors and limits,
// and a whole engine run whose replies are the calculator's.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <map>

#include "hpcrl/io/tokenizer_byte.h"
#include "hpcrl/tools/calculator.h"
#include "hpcrl/tools/tool_turns.h"
#include "rollout/rollout_testing.h"
#include "tools/tool_testing.h"

namespace {

using hpcrl::testing::calc_tags;

using namespace hpcrl;
using tools::ToolTurns;


std::vector<tools::ToolPtr> calculator() { return {std::make_shared<tools::Calculator>()}; }

rollout::Sample sample_of(const io::Tokenizer& tok, const std::string& text, int64_t turns = 0) {
  rollout::Sample s;
  s.tokens = tok.encode(text);
  s.logprobs.assign(s.tokens.size(), -1.0f);
  s.turns = turns;
  return s;
}

// The one reply of a call started on `s` (as the engine does: turns counts this call).
rollout::TurnReply reply_to(ToolTurns& turns, rollout::Sample s) {
  ++s.turns;
  turns.start(7, s);
  auto replies = turns.poll(/*wait=*/true);
  EXPECT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies.at(0).first, 7);
  return replies.at(0).second;
}

TEST(ToolTurns, ACallEndsTheTurnAndItsResultComesBackWrapped) {
  io::ByteTokenizer tok;
  ToolTurns turns(calculator(), calc_tags(), {}, tok, "t");
  const auto s = sample_of(tok, "so <calc>6*7</calc>");
  EXPECT_TRUE(turns.ends_turn(s));
  EXPECT_FALSE(turns.ends_turn(sample_of(tok, "so <calc>6*7</cal")));
  const auto reply = reply_to(turns, s);
  EXPECT_EQ(reply.finish_reason, "");
  EXPECT_EQ(tok.decode(reply.tokens), "<result>42</result>");
  EXPECT_EQ(turns.totals().calls, 1);
  EXPECT_EQ(turns.totals().errors, 0);
}

TEST(ToolTurns, ACloseTagInsideAReplyDoesNotEndATurn) {
  // The row's last 7 tokens hold "</calc>" but were inserted, not sampled.
  io::ByteTokenizer tok;
  ToolTurns turns(calculator(), calc_tags(), {}, tok, "t");
  auto s = sample_of(tok, "a</calc>");
  s.sampled = {1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(turns.ends_turn(s));
}

TEST(ToolTurns, ACloseTagThatIsOneTokenRightAfterAReplyEndsTheTurn) {
  // As Qwen's </tool_call> is one added token: here the byte tokenizer's </think>
  // (id 262, 8 bytes), sampled right after 3 inserted tokens.
  io::ByteTokenizer tok;
  tools::ToolCallFormat think = calc_tags();
  think.open = "<think>";
  think.close = "</think>";
  ToolTurns turns(calculator(), think, {}, tok, "t");
  rollout::Sample s;
  s.tokens = {'4', '2', '>', io::ByteTokenizer::kEndThink};
  s.logprobs = {0, 0, 0, -1};
  s.sampled = {0, 0, 0, 1};
  EXPECT_TRUE(turns.ends_turn(s));
}

TEST(ToolTurns, AFailedCallIsAnErrorObservationOrEndsTheRowAsConfigured) {
  io::ByteTokenizer tok;
  ToolTurns observe(calculator(), calc_tags(), {}, tok, "t");
  const auto seen = reply_to(observe, sample_of(tok, "<calc>2x</calc>"));
  EXPECT_EQ(tok.decode(seen.tokens), "<result>error: cannot evaluate \"2x\": it has variables</result>");
  EXPECT_EQ(observe.totals().errors, 1);
  tools::ToolLimits ending;
  ending.end_on_error = true;
  ToolTurns end(calculator(), calc_tags(), ending, tok, "t");
  const auto ended = reply_to(end, sample_of(tok, "<calc>2x</calc>"));
  EXPECT_EQ(ended.finish_reason, "tool_error");
  EXPECT_TRUE(ended.tokens.empty());
}

TEST(ToolTurns, TheCallPastTheTurnLimitEndsTheRow) {
  io::ByteTokenizer tok;
  tools::ToolLimits two;
  two.max_turns = 2;
  ToolTurns turns(calculator(), calc_tags(), two, tok, "t");
  EXPECT_EQ(reply_to(turns, sample_of(tok, "<calc>1+1</calc>", /*turns=*/1)).finish_reason, "");  // the 2nd call
  EXPECT_EQ(reply_to(turns, sample_of(tok, "<calc>1+1</calc>", /*turns=*/2)).finish_reason, "turns");  // the 3rd
}

TEST(ToolTurns, AResultIsCutToTheReplyTokenLimitInsideItsWrapping) {
  io::ByteTokenizer tok;
  tools::ToolLimits four;
  four.reply_tokens = 4;
  ToolTurns turns(calculator(), calc_tags(), four, tok, "t");
  EXPECT_EQ(tok.decode(reply_to(turns, sample_of(tok, "<calc>4821*7396</calc>")).tokens), "<result>3565</result>");
}

TEST(ToolTurns, CalculatorRepliesJoinEngineTrajectoriesAsOneForwardComputesThem) {
  // A random byte-vocabulary model with the format's close tag set to the byte
  // it samples most often, so turns end often; the text before it is rarely
  // arithmetic, so most replies are the calculator's error observations. Every
  // sampled token's log-prob equals the training forward over the whole
  // trajectory (2e-5, as tests/rollout/multi_turn_test.cpp), and every
  // inserted span is a "<result>...</result>" reply.
  auto m = hpcrl::testing::random_model(hpcrl::testing::test_arch(hpcrl::testing::qwen2_arch()).vocab_size(263).build());
  io::ByteTokenizer tok;
  const auto prompts = hpcrl::testing::random_prompts({6, 4}, 256, 5, 32);
  rollout::SamplingParams p;
  p.max_new_tokens = 48;
  p.seed = 3;
  std::map<int32_t, int64_t> seen;
  for (const auto& s : rollout::Engine(m, nullptr).generate(prompts, 4, p))
    for (int32_t id : s.tokens) ++seen[id];
  int32_t frequent = 0;
  for (const auto& [id, count] : seen)
    if (id < 128 && count > seen[frequent]) frequent = id;
  tools::ToolCallFormat format = calc_tags();
  format.open = "";
  format.close = std::string(1, char(frequent));
  ToolTurns turns(calculator(), format, {}, tok, "t");
  rollout::GenerationCall call;
  for (int64_t q = 0; q < 2; ++q)
    for (int64_t i = 0; i < 4; ++i) call.samples.push_back({q, i});
  call.turns = &turns;
  rollout::EngineOptions o;
  o.max_batch = 3;
  rollout::Engine engine(m, &tok, o);
  const auto out = engine.run(prompts, call, p).finished;
  EXPECT_GT(turns.totals().calls, 2) << "the close byte " << frequent << " was sampled too rarely";
  for (const auto& s : out) {
    std::vector<int64_t> seq(prompts[size_t(s.prompt_index)].begin(), prompts[size_t(s.prompt_index)].end());
    seq.insert(seq.end(), s.tokens.begin(), s.tokens.end());
    torch::NoGradGuard no_grad;
    at::Tensor lp = m->local_logits(m->forward(at::tensor(seq, at::kLong).unsqueeze(0)).hidden)[0].log_softmax(-1);
    const int64_t P = int64_t(prompts[size_t(s.prompt_index)].size());
    std::string inserted;
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      if (!s.was_sampled(t)) {
        inserted += char(s.tokens[t]);
        continue;
      }
      EXPECT_NEAR(s.logprobs[t], lp[P + int64_t(t) - 1][s.tokens[t]].item<double>(), 2e-5) << "token " << t;
    }
    if (s.turns > 0 && !inserted.empty()) EXPECT_EQ(inserted.rfind("<result>", 0), 0u) << inserted;
  }
}

}  // namespace
