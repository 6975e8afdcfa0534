// Reading `hpcrl generate` requests (prompt_file.h).
#include "hpcrl/rollout/prompt_file.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <sstream>

#include "hpcrl/io/chat_template.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::rollout {

namespace {
const char* kShape = "each line must be a JSON object with one of \"prompt\" (text), \"messages\" "
                     "([{\"role\": .., \"content\": ..}]) or \"prompt_ids\" ([ids])";

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

std::vector<io::ChatMessage> parse_messages(const nlohmann::json& m, const std::string& where) {
  if (!m.is_array() || m.empty()) fail(where, "\"messages\" must be a non-empty array of {\"role\", \"content\"}");
  std::vector<io::ChatMessage> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& e = m[i];
    if (!e.is_object() || !e.contains("role") || !e.contains("content") || !e["role"].is_string() ||
        !e["content"].is_string())
      fail(where, "messages[" + std::to_string(i) + "] must be {\"role\": string, \"content\": string}");
    out.push_back({e["role"].get<std::string>(), e["content"].get<std::string>()});
  }
  return out;
}

std::vector<int32_t> parse_ids(const nlohmann::json& ids, int64_t vocab_size, const std::string& where) {
  if (!ids.is_array()) fail(where, "\"prompt_ids\" must be an array of token ids");
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer())
      fail(where, "prompt_ids[" + std::to_string(i) + "] is " + ids[i].dump() + ", not an integer token id");
    const int64_t id = ids[i].get<int64_t>();
    if (id < 0 || id >= vocab_size)
      fail(where, "prompt_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                      " is outside the model's vocabulary [0, " + std::to_string(vocab_size) + ")");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}
}  // namespace

namespace {
// The line as a JSON object with exactly one of the three request keys.
nlohmann::json parse_request_line(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(where + ":" + std::to_string(json_errors::offset(e, text) + 1),
         "not valid JSON (" + json_errors::problem(e) + "); " + kShape);
  }
  if (!j.is_object()) fail(where, std::string("found ") + j.type_name() + "; " + kShape);
  const int kinds = int(j.contains("prompt")) + int(j.contains("messages")) + int(j.contains("prompt_ids"));
  if (kinds == 0) {
    std::string hint;
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string c = str::closest(it.key(), {"prompt", "messages", "prompt_ids"});
      if (!c.empty()) hint = " (\"" + it.key() + "\": did you mean \"" + c + "\"?)";
    }
    fail(where, std::string("no request") + hint + "; " + kShape);
  }
  if (kinds > 1) fail(where, "give only one of \"prompt\", \"messages\" and \"prompt_ids\" per line");
  return j;
}

// The template "messages" lines are rendered with: the tokenizer's own for `model`, else the fixed renderer.
io::ChatTemplate chat_template_for(config::ChatTemplate chat_template, const io::Tokenizer& tok) {
  switch (chat_template) {
    case config::ChatTemplate::model:
      return io::ChatTemplate::for_tokenizer(tok);
    default:
      return io::ChatTemplate::named(chat_template);
  }
}
}  // namespace

PromptFile read_prompt_file(const std::string& path, const io::Tokenizer& tok, int64_t vocab_size,
                            config::ChatTemplate chat_template) {
  std::istringstream in(fs::read_file(path, "prompt file"));
  std::optional<io::ChatTemplate> tmpl;  // resolved on the first "messages" line
  PromptFile file;
  std::string text;
  for (int64_t line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    const nlohmann::json j = parse_request_line(text, where);
    PromptRequest r;
    r.line = line_no;
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string()) fail(where, "\"prompt\" must be a string");
      r.text = j["prompt"].get<std::string>();
      if (r.text.empty()) fail(where, "the prompt is empty; every prompt needs at least one token");
      r.ids = tok.encode(r.text, /*add_special=*/true);
    } else if (j.contains("messages")) {
      if (!tmpl) {
        try {
          tmpl = chat_template_for(chat_template, tok);
        } catch (const InputError& e) {
          fail(where, std::string(e.what()) + " (--chat-template NAME picks one: none, chatml, qwen3, llama3)");
        }
      }
      r.text = tmpl->render(parse_messages(j["messages"], where), /*add_generation_prompt=*/true);
      if (r.text.empty()) fail(where, "the messages render to an empty prompt");
      r.ids = tok.encode(r.text, /*add_special=*/false);
      file.chat = file.chat || tmpl->name() != "none";
    } else {
      r.ids = parse_ids(j["prompt_ids"], vocab_size, where);
      if (r.ids.empty()) fail(where, "\"prompt_ids\" is empty; every prompt needs at least one token");
      r.text = tok.decode(r.ids);
    }
    if (r.ids.empty()) fail(where, "the prompt encodes to no tokens");
    for (size_t i = 0; i < r.ids.size(); ++i)
      if (r.ids[i] >= vocab_size)
        fail(where, "token " + std::to_string(r.ids[i]) + " of the encoded prompt is outside the model's vocabulary"
                    " [0, " + std::to_string(vocab_size) + "): the tokenizer does not match the model");
    file.prompts.push_back(std::move(r));
  }
  if (file.prompts.empty())
    throw InputError(path + " has no prompts: " + kShape);
  return file;
}

std::vector<int32_t> stop_token_ids(const io::Tokenizer& tok, bool chat) {
  std::vector<int32_t> out;
  if (tok.eos_id() >= 0) out.push_back(tok.eos_id());
  if (chat)
    for (const char* t : {"<|im_end|>", "<|eot_id|>"}) {
      int32_t id = tok.token_to_id(t);
      if (id >= 0 && id != tok.eos_id()) out.push_back(id);
    }
  return out;
}

}  // namespace hpcrl::rollout
