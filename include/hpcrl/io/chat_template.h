// Chat templates: how a list of {role, content} messages becomes the prompt
// text a chat model was trained on. HF ships these as Jinja programs in
// tokenizer_config.json:
//
//   "model"   the tokenizer's own Jinja template, run by hpcrl's Jinja
//             interpreter (hpcrl/io/jinja.h) in HF's environment, with
//             messages, add_generation_prompt, enable_thinking, bos_token,
//             eos_token and optionally a `tools` list; any instruct model
//
// and small fixed renderers, kept as named fallbacks, that produce
// byte-identical output for the formats they cover:
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

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpcrl/config/enums.h"

namespace hpcrl::io {

struct ChatMessage {
  std::string role;     // system | user | assistant (| tool for qwen3)
  std::string content;
};

class Tokenizer;
namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // A fixed renderer (none, chatml, qwen3, llama3). `model`, the tokenizer's
  // own, needs the tokenizer (model(tok)): InputError.
  static ChatTemplate named(config::ChatTemplate which);
  // ChatML with a default system prompt, used when messages[0] is not "system"
  // (Qwen2/2.5 templates insert one).
  static ChatTemplate chatml(std::string default_system = "");
  // The renderer that reproduces a tokenizer_config.json Jinja chat_template,
  // or nullopt when it is none of the supported formats.
  static std::optional<ChatTemplate> detect(const std::string& jinja);
  // The tokenizer's own Jinja chat_template ("model"), with its bos/eos
  // tokens; InputError naming the tokenizer when it declares none or the
  // template is outside the supported Jinja subset.
  static ChatTemplate model(const Tokenizer& tok);
  // A Jinja chat template given as text ("model"); `source` names it in errors.
  static ChatTemplate jinja(const std::string& text, const std::string& source, std::string bos_token = "",
                            std::string eos_token = "");
  // What `auto` picks: the tokenizer's own template (model(tok)).
  static ChatTemplate for_tokenizer(const Tokenizer& tok);

  // Renders the conversation. `add_generation_prompt` appends the header of
  // the assistant turn the model is to write. InputError on an unknown role
  // (fixed renderers) or on the template's own raise_exception (model).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     bool enable_thinking = true) const;
  // The general form for "model": `messages` in HF's format (role, content,
  // tool_calls, tool_call_id, reasoning_content, ...), and `variables` (a
  // JSON object) such as {"tools": [...], "enable_thinking": false} passed
  // to the template as they are. Fixed renderers accept role/content
  // messages only and refuse tools.
  std::string render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                          const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) const;

  const std::string& name() const { return name_; }

 private:
  explicit ChatTemplate(std::string name) : name_(std::move(name)) {}
  std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                           bool enable_thinking) const;
  std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  std::string name_;
  std::string default_system_;  // chatml only
  std::shared_ptr<const jinja::Template> jinja_;  // model only
  std::string bos_token_, eos_token_;             // model only; "" = not passed
};

// The fixed renderers: "none", "chatml", "qwen3", "llama3" ("model" needs a tokenizer).
std::vector<std::string> chat_template_names();

}  // namespace hpcrl::io
