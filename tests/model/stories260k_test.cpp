// A real trained Llama-architecture checkpoint (llama2.c stories260K, converted
// to HF layout) must reproduce the logits that llama2.c's own C implementation
// computed for 16 tokens (positions 0..15, BOS = 1) to 1e-4.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>

#include "hpcrl/model/pretrained.h"

namespace hpcrl::model {
namespace {

const std::string kDir = std::string(HPCRL_DATA_DIR) + "/stories260k";

at::Tensor reference_logits() {
  std::ifstream in(kDir + "/logits-reference.txt");
  EXPECT_TRUE(in.good()) << "missing fixture " << kDir << "/logits-reference.txt";
  std::vector<float> v;
  float x;
  while (in >> x) v.push_back(x);
  EXPECT_EQ(v.size(), 16u * 512u);
  return torch::tensor(v).view({16, 512});
}

TEST(Stories260k, LogitsMatchLlama2cReference) {
  ASSERT_TRUE(std::filesystem::exists(kDir + "/model.safetensors")) << "missing fixture " << kDir;
  auto model = load_model(kDir, parallel::ParallelContext{});
  EXPECT_EQ(model->arch().num_kv_heads, 4);
  torch::NoGradGuard ng;
  at::Tensor ids = torch::tensor({1, 403, 407, 261, 378, 425, 266, 300, 322, 280, 9, 77, 500, 42, 7, 260}, torch::kLong)
                       .view({1, 16});
  at::Tensor logits = model->local_logits(model->forward(ids).hidden)[0];  // [16, 512]
  at::Tensor ref = reference_logits();
  EXPECT_LE((logits - ref).abs().max().item<float>(), 1e-4);
}

}  // namespace
}  // namespace hpcrl::model
