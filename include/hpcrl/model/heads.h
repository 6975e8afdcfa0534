// The scalar value head of critics and reward models: one linear map of the
// final hidden state to a number per token. Named "score" with weight [1, C],
// as HF's *ForTokenClassification / *ForSequenceClassification name it, so a
// saved critic loads there. Replicated over tp (its input is replicated).
// The LM head (vocab-parallel logits and log-probs) lives in DecoderModel, since
// a tied head is the embedding table itself.
#pragma once

#include <torch/nn/module.h>

namespace hpcrl::model {

class ValueHead : public torch::nn::Module {
 public:
  explicit ValueHead(int64_t hidden);
  at::Tensor forward(const at::Tensor& hidden);  // [B, T, C] -> [B, T] float32

  at::Tensor weight;  // [1, C]
};

}  // namespace hpcrl::model
