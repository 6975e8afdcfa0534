// The teacher's top-k (teacher_topk.h): with k below the vocabulary, the k
// largest log-probs, most likely first; with k covering it (top_k: 0), every id
// in vocabulary order with its log-prob, the same values the top-k gives for
// the ids they share — without sorting each row.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include <memory>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/objectives/teacher_topk.h"
#include "hpcrl/config/model_arch.h"

namespace {

using namespace hpcrl;

algo::Role tiny_role() {
  algo::Role role;
  role.name = "teacher";
  model::ModelOptions opts;
  opts.seed = 5;
  role.model = std::make_shared<model::DecoderModel>(model_arch_preset("tiny-2l"), parallel::ParallelContext{}, opts);
  return role;
}

at::Tensor hidden_states(const algo::Role& role) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  return at::randn({2, 3, role.model->arch().hidden_size}, gen, at::kFloat);
}

TEST(TeacherTopK, KBelowTheVocabularyGivesTheLargestLogProbsMostLikelyFirst) {
  torch::NoGradGuard no_grad;
  algo::Role role = tiny_role();
  const at::Tensor h = hidden_states(role);
  const algo::TopK top = algo::vocab_parallel_topk(role, h, 5, 2.0);
  const at::Tensor want = (role.model->local_logits(h) / 2.0).log_softmax(-1);  // [2, 3, V]
  const auto [values, ids] = want.topk(5, -1);
  EXPECT_TRUE(top.ids.equal(ids));
  EXPECT_TRUE(top.logprob.allclose(values, 0, 1e-5));
}

TEST(TeacherTopK, TheWholeVocabularyIsEveryIdInOrderWithItsLogProb) {
  torch::NoGradGuard no_grad;
  algo::Role role = tiny_role();
  const at::Tensor h = hidden_states(role);
  const int64_t V = role.model->arch().vocab_size;
  const algo::TopK all = algo::vocab_parallel_topk(role, h, V, 2.0);
  ASSERT_EQ(all.ids.sizes(), (std::vector<int64_t>{2, 3, V}));
  EXPECT_TRUE(all.ids.equal(at::arange(V, at::kLong).expand({2, 3, V})));
  const at::Tensor want = (role.model->local_logits(h) / 2.0).log_softmax(-1);
  EXPECT_TRUE(all.logprob.allclose(want, 0, 1e-5));
  // The top-5's values at its ids are exactly the whole vocabulary's there (one normaliser).
  const algo::TopK top = algo::vocab_parallel_topk(role, h, 5, 2.0);
  EXPECT_TRUE(all.logprob.gather(-1, top.ids).equal(top.logprob));
}

}  // namespace
