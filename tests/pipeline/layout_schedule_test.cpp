// Single-rank properties of pipeline layouts and schedules: the parameter-
// balanced split, explicit layer lists, the exact errors for layouts and
// micro-batch counts a schedule cannot take, and the schedules' orders
// (every pass once, a forward before its backward, 1F1B's bounded number of
// passes in flight, Megatron's interleaved order) and theoretical bubbles.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "hpcrl/model/pipeline_layout.h"
#include "hpcrl/parallel/pipeline/schedule.h"
#include "hpcrl/util/error.h"
#include "model/test_models.h"

namespace hpcrl {
namespace {

using model::partition_layers;
using model::PipelineLayout;
namespace pipe = parallel::pipeline;

// The llama-shaped model the layouts split: vocabulary 64, hidden 32, FFN 48,
// 4 query heads over 2 KV heads of 8, tied embeddings. Each test sets its
// number of layers (and vocabulary, where the embedding's size matters).
testing::TestArch llama_arch() {
  return testing::test_arch()
      .family("llama")
      .vocab_size(64)
      .hidden_size(32)
      .intermediate_size(48)
      .num_heads(4)
      .num_kv_heads(2)
      .head_dim(8)
      .tie_word_embeddings(true);
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(PipelineLayout, SmallEmbeddingSplitsEvenly) {
  PipelineLayout l = partition_layers(llama_arch().num_layers(8).build(), 2);
  EXPECT_EQ(l.chunk_layers, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(l.first_layer(1), 4);
  EXPECT_EQ(l.end_layer(1), 8);
  EXPECT_EQ(l.describe(), "pp=2 × 1 chunk: layers [0, 4) | [4, 8)");
}

TEST(PipelineLayout, LargeVocabulariesLeaveTheEndStagesFewerLayers) {
  // Embedding 4096·32 = 131k parameters ≈ 10 layers of 13k: the first and last
  // stages (embedding / LM head) get fewer layers than the middle ones.
  PipelineLayout l = partition_layers(llama_arch().num_layers(16).vocab_size(4096).build(), 4);
  int64_t sum = 0;
  for (int64_t n : l.chunk_layers) sum += n;
  EXPECT_EQ(sum, 16);
  EXPECT_LT(l.chunk_layers[0], l.chunk_layers[1]);
  EXPECT_LT(l.chunk_layers[3], l.chunk_layers[2]);
  EXPECT_GE(l.chunk_layers[0], 1);
}

TEST(PipelineLayout, VirtualStagesPlaceChunksRoundRobin) {
  PipelineLayout l = partition_layers(llama_arch().num_layers(8).build(), 2, 2);
  EXPECT_EQ(l.num_chunks(), 4);
  EXPECT_EQ(l.chunks_of_rank(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.chunks_of_rank(1), (std::vector<int>{1, 3}));
  EXPECT_EQ(l.rank_of_chunk(3), 1);
  EXPECT_EQ(l.chunk_of_layer(7), 3);
}

TEST(PipelineLayout, ExplicitListIsKept) {
  PipelineLayout l = partition_layers(llama_arch().num_layers(6).build(), 3, 1, {1, 3, 2});
  EXPECT_EQ(l.chunk_layers, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(l.chunk_of_layer(3), 1);
  EXPECT_EQ(l.chunk_of_layer(4), 2);
}

TEST(PipelineLayout, BadLayoutsAreInputErrorsNamingTheFix) {
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 8); }),
            "pipeline layout: pp=8 needs 8 stages of at least one layer, but the model has 4 layers; use at most 4 "
            "pipeline stages");
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 4, 2); }),
            "pipeline layout: pp=4 × 2 virtual stages needs 8 stages of at least one layer, but the model has 4 "
            "layers; use at most 4 pipeline stages");
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 2, 1, {2, 1}); }),
            "pipeline layout: the per-stage layer list [2, 1] adds up to 3 layers but the model has 4; make the "
            "counts add up to 4");
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 2, 1, {4, 0}); }),
            "pipeline layout: stage 1 of the per-stage layer list [4, 0] has 0 layers; every stage needs at least "
            "one");
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 2, 1, {1, 1, 2}); }),
            "pipeline layout: the per-stage layer list [1, 1, 2] has 3 entries but pp=2 has 2 stages; give one "
            "layer count per stage");
  EXPECT_EQ(input_error([] { partition_layers(llama_arch().num_layers(4).build(), 1, 2); }),
            "pipeline layout: 2 virtual stages need pp > 1 (interleaving chunks on a single rank only adds "
            "overhead); use virtual stages 1");
}

// Every (micro-batch, chunk) of the rank runs forward once and backward once, forward first.
void expect_complete(const std::vector<pipe::Action>& actions, int m, const std::vector<int>& chunks) {
  std::map<std::pair<int, int>, int> state;  // 1 after forward, 2 after backward
  for (const auto& a : actions) {
    int& s = state[{a.microbatch, a.chunk}];
    if (a.kind == pipe::Action::kForward) {
      EXPECT_EQ(s, 0) << "forward twice: mb " << a.microbatch << " chunk " << a.chunk;
      s = 1;
    } else {
      EXPECT_EQ(s, 1) << "backward before forward: mb " << a.microbatch << " chunk " << a.chunk;
      s = 2;
    }
  }
  EXPECT_EQ(state.size(), m * chunks.size());
  for (const auto& [key, s] : state) {
    EXPECT_EQ(s, 2);
    EXPECT_NE(std::find(chunks.begin(), chunks.end(), key.second), chunks.end());
  }
}

int max_in_flight(const std::vector<pipe::Action>& actions) {
  int now = 0, most = 0;
  for (const auto& a : actions) {
    now += a.kind == pipe::Action::kForward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

TEST(PipelineSchedule, EveryPassRunsOnceForwardFirst) {
  for (int pp : {1, 2, 4})
    for (int m : {1, 2, 3, 4, 8})
      for (int r = 0; r < pp; ++r) {
        expect_complete(pipe::schedule_actions(pipe::Schedule::gpipe, m, pp, r), m, {r});
        expect_complete(pipe::schedule_actions(pipe::Schedule::_1f1b, m, pp, r), m, {r});
        if (pp > 1 && m % pp == 0)
          expect_complete(pipe::schedule_actions(pipe::Schedule::interleaved, m, pp, r, 2), m, {r, r + pp});
      }
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostPpMinusRankActivations) {
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(max_in_flight(pipe::schedule_actions(pipe::Schedule::_1f1b, 8, 4, r)), 4 - r);
    EXPECT_EQ(max_in_flight(pipe::schedule_actions(pipe::Schedule::gpipe, 8, 4, r)), 8);
  }
  // Last stage: strictly alternating F0 B0 F1 B1 ...
  auto last = pipe::schedule_actions(pipe::Schedule::_1f1b, 3, 2, 1);
  ASSERT_EQ(last.size(), 6u);
  EXPECT_EQ(last[0], (pipe::Action{pipe::Action::kForward, 0, 1}));
  EXPECT_EQ(last[1], (pipe::Action{pipe::Action::kBackward, 0, 1}));
  EXPECT_EQ(last[2], (pipe::Action{pipe::Action::kForward, 1, 1}));
}

TEST(PipelineSchedule, InterleavedFollowsMegatronOrder) {
  // pp=2, v=2, m=4, rank 0: warm-up (2-0-1)·2 + (2-1)·2 = 4 forwards over
  // micro-batches 0,1 of chunk 0 then chunk 2; backwards start with chunk 2.
  auto a = pipe::schedule_actions(pipe::Schedule::interleaved, 4, 2, 0, 2);
  using A = pipe::Action;
  std::vector<A> head{{A::kForward, 0, 0}, {A::kForward, 1, 0}, {A::kForward, 0, 2}, {A::kForward, 1, 2},
                      {A::kForward, 2, 0}, {A::kBackward, 0, 2}};
  ASSERT_GE(a.size(), head.size());
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(a[i], head[i]) << "pass " << i;
  EXPECT_LE(max_in_flight(a), 6);
}

TEST(PipelineSchedule, InterleavedNeedsMicrobatchesMultipleOfPp) {
  EXPECT_EQ(input_error([] { pipe::schedule_actions(pipe::Schedule::interleaved, 6, 4, 0, 2); }),
            "pipeline schedule interleaved_1f1b needs the number of micro-batches to be a multiple of pp, got 6 "
            "micro-batches for pp=4; use 8 micro-batches, or the 1f1b schedule");
  EXPECT_EQ(input_error([] { pipe::schedule_actions(pipe::Schedule::_1f1b, 4, 2, 0, 2); }),
            "pipeline schedule 1f1b runs one model chunk per rank, but 2 virtual stages were asked for; use "
            "interleaved_1f1b or virtual stages 1");
  EXPECT_EQ(input_error([] { pipe::schedule_actions(pipe::Schedule::gpipe, 0, 2, 0); }),
            "pipeline schedule: need at least one micro-batch, got 0");
}

TEST(PipelineSchedule, NamesParseAndSuggest) {
  EXPECT_EQ(pipe::parse_schedule("1f1b"), pipe::Schedule::_1f1b);
  EXPECT_EQ(pipe::parse_schedule("gpipe"), pipe::Schedule::gpipe);
  EXPECT_EQ(pipe::parse_schedule("interleaved_1f1b"), pipe::Schedule::interleaved);
  EXPECT_EQ(pipe::parse_schedule("interleaved"), pipe::Schedule::interleaved);
  EXPECT_STREQ(pipe::schedule_name(pipe::Schedule::interleaved), "interleaved_1f1b");
  EXPECT_EQ(input_error([] { pipe::parse_schedule("1f1f"); }),
            "unknown pipeline schedule '1f1f' (did you mean '1f1b'?); schedules: gpipe, 1f1b, interleaved_1f1b");
}

TEST(PipelineSchedule, TheoreticalBubble) {
  EXPECT_DOUBLE_EQ(pipe::theoretical_bubble(pipe::Schedule::_1f1b, 4, 2), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(pipe::theoretical_bubble(pipe::Schedule::gpipe, 8, 4), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipe::theoretical_bubble(pipe::Schedule::interleaved, 8, 4, 2), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(pipe::theoretical_bubble(pipe::Schedule::_1f1b, 16, 1), 0.0);
}

}  // namespace
}  // namespace hpcrl
