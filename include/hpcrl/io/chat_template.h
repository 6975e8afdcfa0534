// Chat templates: how a list of {role, content} messages becomes the prompt
// text a chat model was trained on. HF ships these as Jinja programs in
// tokenizer_config.json; hpcrl does not run Jinja but has small fixed
// renderers that produce byte-identical output for the formats it supports:
//
//   "chatml"  <|im_start|>ROLE\nCONTENT<|im_end|>\n ...  (Qwen2/2.5 style; an
//             optional default system prompt when the first message is not one)
//   "qwen3"   ChatML with Qwen3's thinking rules: past assistant turns lose
//             their <think> block, and enable_thinking=false puts an empty
//             "<think>\n\n</think>\n\n" after the generation prompt
//   "llama3"  <|begin_of_text|><|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//   "none"    the message contents concatenated, no markup
//
// The rendered text contains the special tokens as text; Tokenizer::encode
// turns them into their single ids.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::io {

struct ChatMessage {
  std::string role;     // system | user | assistant (| tool for qwen3)
  std::string content;
};

class Tokenizer;

class ChatTemplate {
 public:
  // One of chat_template_names(); InputError with "did you mean" otherwise.
  static ChatTemplate named(const std::string& name);
  // ChatML with a default system prompt, used when messages[0] is not "system"
  // (Qwen2/2.5 templates insert one).
  static ChatTemplate chatml(std::string default_system = "");
  // The renderer that reproduces a tokenizer_config.json Jinja chat_template,
  // or nullopt when it is none of the supported formats.
  static std::optional<ChatTemplate> detect(const std::string& jinja);
  // detect(tok.chat_template_jinja()), or InputError naming the tokenizer and
  // telling the user to pick a template by name.
  static ChatTemplate for_tokenizer(const Tokenizer& tok);

  // Renders the conversation. `add_generation_prompt` appends the header of
  // the assistant turn the model is to write. InputError on an unknown role.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     bool enable_thinking = true) const;

  const std::string& name() const { return name_; }

 private:
  explicit ChatTemplate(std::string name) : name_(std::move(name)) {}
  std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                           bool enable_thinking) const;
  std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  std::string name_;
  std::string default_system_;  // chatml only
};

// "none", "chatml", "qwen3", "llama3".
std::vector<std::string> chat_template_names();

}  // namespace hpcrl::io
