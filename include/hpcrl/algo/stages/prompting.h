// Turning a dataset example into the token ids a model sees: the prompt (with
// the dataset's chat template and system prompt) and, for supervised targets,
// the response followed by the tokenizer's EOS. Every stage builds prompts
// here, so SFT, RL and evaluation agree on the exact prompt tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/io/dataset.h"
#include "hpcrl/io/tokenizer.h"

namespace hpcrl::algo {

class PromptBuilder {
 public:
  // `data` may be null (synthetic data: no template, BOS + raw prompt).
  // `tools`: the stage's tools' schemas (StageToolkit::schemas()), which a
  // dataset's `chat_template: model` renders from its `tools` variable; the
  // fixed renderers have no place for them (docs/tools.md).
  PromptBuilder(const io::Tokenizer& tokenizer, const config::DatasetConfig* data,
                nlohmann::ordered_json tools = nlohmann::ordered_json::array());

  std::string prompt_text(const io::Example& ex) const;
  std::vector<int32_t> prompt_ids(const io::Example& ex) const;
  // Response tokens + EOS (the supervised target).
  std::vector<int32_t> response_ids(const io::Example& ex) const;
  // response_ids with each token's mark: 1 the model's own text, 0 inside a
  // range a tool inserted (Example::inserted; each range tokenized on its own,
  // as the engine inserts a reply). Empty marks: nothing inserted.
  std::vector<int32_t> response_ids(const io::Example& ex, std::vector<uint8_t>& sampled) const;
  // Every id that ends a generation (EOS, and the template's end-of-turn token).
  std::vector<int32_t> stop_ids() const;

 private:
  const io::Tokenizer& tok_;
  const config::DatasetConfig* data_;
  const nlohmann::ordered_json tools_;
};

}  // namespace hpcrl::algo
