// Distillation divergences against hand-computed values and gradients.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/algo/objectives/distill_loss.h"
#include "hpcrl/util/error.h"

using namespace hpcrl::algo;

namespace {
at::Tensor logits_of(std::vector<float> p) { return torch::log(torch::tensor(p)).unsqueeze(0); }
}  // namespace

TEST(DistillLoss, ForwardReverseJsd) {
  at::Tensor s = logits_of({.5f, .5f}), t = logits_of({.9f, .1f});
  // .9 ln(.9/.5) + .1 ln(.1/.5)
  EXPECT_NEAR(distill_divergence(s, t, DistillLoss::forward_kl).item<float>(), 0.368064f, 1e-5);
  // .5 ln(.5/.9) + .5 ln(.5/.1)
  EXPECT_NEAR(distill_divergence(s, t, DistillLoss::reverse_kl).item<float>(), 0.510826f, 1e-5);
  // m = (.7, .3): .5·KL(t‖m) + .5·KL(s‖m) = .5·.116322 + .5·.087177
  EXPECT_NEAR(distill_divergence(s, t, DistillLoss::jsd, 0.5).item<float>(), 0.1017495f, 1e-5);
}

TEST(DistillLoss, ForwardKlGradientIsStudentMinusTeacher) {
  at::Tensor s = logits_of({.5f, .5f}).requires_grad_(true);
  distill_divergence(s, logits_of({.9f, .1f}), DistillLoss::forward_kl).sum().backward();
  EXPECT_NEAR(s.grad()[0][0].item<float>(), -0.4f, 1e-5);
  EXPECT_NEAR(s.grad()[0][1].item<float>(), 0.4f, 1e-5);
}

TEST(DistillLoss, TopKRenormalisesOnTeacherSupport) {
  // teacher top-2 of (.6,.3,.1) → (2/3, 1/3); student uniform → (.5, .5) on that support.
  at::Tensor s = logits_of({1.f / 3, 1.f / 3, 1.f / 3}), t = logits_of({.6f, .3f, .1f});
  EXPECT_NEAR(distill_divergence(s, t, DistillLoss::forward_kl, 0.5, 2).item<float>(), 0.0566330f, 1e-5);
}

TEST(DistillLoss, VocabularyMismatchIsInputError) {
  EXPECT_THROW(distill_divergence(torch::zeros({1, 3}), torch::zeros({1, 4}), DistillLoss::forward_kl),
               hpcrl::InputError);
}
