// Prompt and target ids from dataset examples (see prompting.h).
#include "hpcrl/algo/stages/prompting.h"

#include "hpcrl/io/chat_template.h"

namespace hpcrl::algo {

PromptBuilder::PromptBuilder(const io::Tokenizer& tokenizer, const config::DatasetConfig* data,
                             nlohmann::ordered_json tools)
    : tok_(tokenizer), data_(data), tools_(std::move(tools)) {}

std::string PromptBuilder::prompt_text(const io::Example& ex) const {
  if (!data_ || data_->kind != config::DataKind::jsonl) return ex.prompt;
  const auto& j = data_->jsonl;
  std::vector<io::ChatMessage> msgs;
  if (!j.system_prompt.empty()) msgs.push_back({"system", j.system_prompt});
  msgs.push_back({"user", ex.prompt});
  switch (j.chat_template) {
    case config::ChatTemplate::none:
      return (j.system_prompt.empty() ? "" : j.system_prompt + "\n") + ex.prompt;
    case config::ChatTemplate::qwen3:
      return io::ChatTemplate::named(config::ChatTemplate::qwen3).render(msgs, true, j.thinking);
    case config::ChatTemplate::model: {  // the tokenizer's own Jinja template; `thinking` is its enable_thinking
      if (tools_.empty()) return io::ChatTemplate::model(tok_).render(msgs, true, j.thinking);
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const auto& m : msgs) messages.push_back({{"role", m.role}, {"content", m.content}});
      return io::ChatTemplate::model(tok_).render_json(messages, true,
                                                       {{"tools", tools_}, {"enable_thinking", j.thinking}});
    }
    default:
      return io::ChatTemplate::named(j.chat_template).render(msgs, true);
  }
}

std::vector<int32_t> PromptBuilder::prompt_ids(const io::Example& ex) const {
  std::vector<int32_t> ids;
  std::string text = prompt_text(ex);
  // Templates that write their own BOS (llama3) must not get a second one.
  bool templated = data_ && data_->kind == config::DataKind::jsonl &&
                   data_->jsonl.chat_template != config::ChatTemplate::none;
  if (!templated && tok_.bos_id() >= 0) ids.push_back(tok_.bos_id());
  auto body = tok_.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int32_t> PromptBuilder::response_ids(const io::Example& ex, std::vector<uint8_t>& sampled) const {
  sampled.clear();
  if (ex.inserted.empty()) return response_ids(ex);
  std::vector<int32_t> ids;
  size_t at = 0;
  auto piece = [&](size_t first, size_t last, uint8_t mark) {
    if (last <= first) return;
    for (int32_t id : tok_.encode(ex.response.substr(first, last - first))) {
      ids.push_back(id);
      sampled.push_back(mark);
    }
  };
  for (const auto& [first, last] : ex.inserted) {
    piece(at, first, 1);
    piece(first, last, 0);
    at = last;
  }
  piece(at, ex.response.size(), 1);
  const auto stops = stop_ids();
  if (!stops.empty()) {
    ids.push_back(stops.front());
    sampled.push_back(1);
  }
  return ids;
}

std::vector<int32_t> PromptBuilder::response_ids(const io::Example& ex) const {
  std::vector<int32_t> ids = tok_.encode(ex.response);
  auto stops = stop_ids();
  if (!stops.empty()) ids.push_back(stops.front());
  return ids;
}

std::vector<int32_t> PromptBuilder::stop_ids() const {
  std::vector<int32_t> out;
  // Chat models end a turn with their end-of-turn token, which may differ from EOS.
  if (data_ && data_->kind == config::DataKind::jsonl) {
    for (const char* t : {"<|im_end|>", "<|eot_id|>"}) {
      int32_t id = tok_.token_to_id(t);
      if (id >= 0 && (data_->jsonl.chat_template != config::ChatTemplate::none)) out.push_back(id);
    }
  }
  if (tok_.eos_id() >= 0) out.push_back(tok_.eos_id());
  return out;
}

}  // namespace hpcrl::algo
