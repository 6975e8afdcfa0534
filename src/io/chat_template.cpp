// Chat templates (see chat_template.h): the model's own Jinja template, and
// fixed renderers that each follow the Jinja template they replace line by
// line, so the comments cite it; the tests compare against what HF renders
// for the fixture tokenizers.
#include "hpcrl/io/chat_template.h"

#include <map>
#include <mutex>

#include "hpcrl/io/jinja.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"
#include "io/tokenizer_bytes.h"

namespace hpcrl::io {
namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Python's str.lstrip/rstrip/strip with a set of characters.
std::string lstrip(const std::string& s, const char* chars) {
  size_t b = s.find_first_not_of(chars);
  return b == std::string::npos ? "" : s.substr(b);
}
std::string rstrip(const std::string& s, const char* chars) {
  size_t e = s.find_last_not_of(chars);
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}

// Jinja's `trim` filter: Python str.strip() (Unicode whitespace, incl. U+001C..U+001F).
std::string jinja_trim(const std::string& s) {
  auto space = [](int32_t cp) { return bytes::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); };
  size_t b = 0, e = s.size();
  int32_t cp = 0;
  while (b < e) {
    size_t len = bytes::utf8_next(s, b, &cp);
    if (!space(cp)) break;
    b += len;
  }
  while (e > b) {
    size_t p = e - 1;
    while (p > b && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
    bytes::utf8_next(s, p, &cp);
    if (!space(cp)) break;
    e = p;
  }
  return s.substr(b, e - b);
}

void check_role(const ChatMessage& m, size_t i, std::initializer_list<const char*> roles, const std::string& tmpl) {
  for (const char* r : roles)
    if (m.role == r) return;
  std::vector<std::string> names(roles.begin(), roles.end());
  throw InputError("chat message " + std::to_string(i) + " has role '" + m.role + "', which the " + tmpl +
                   " template does not render; use one of: " + str::join(names, ", "));
}

// Unescapes a Jinja single-quoted string body (\n, \t, \\, \').
std::string jinja_unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char c = s[++i];
      out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Qwen2/2.5 templates write a default system turn as one literal:
// '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n'. Returns its text or "".
std::string literal_default_system(const std::string& jinja) {
  const std::string open = "<|im_start|>system\\n";
  for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1)) {
    size_t body = at + open.size(), end = jinja.find("<|im_end|>", body);
    if (end == std::string::npos) break;
    std::string text = jinja.substr(body, end - body);
    // A literal, not "' + messages[0].content + '" or a {{ }} expression.
    if (!text.empty() && text.find_first_of("'\"{}") == std::string::npos) return jinja_unescape(text);
  }
  return "";
}

}  // namespace

std::vector<std::string> chat_template_names() { return {"none", "chatml", "qwen3", "llama3"}; }

ChatTemplate ChatTemplate::named(config::ChatTemplate which) {
  switch (which) {
    case config::ChatTemplate::none:
    case config::ChatTemplate::chatml:
    case config::ChatTemplate::qwen3:
    case config::ChatTemplate::llama3:
      return ChatTemplate(config::to_string(which));
    case config::ChatTemplate::model:
      break;
  }
  throw InputError("chat template 'model' is the tokenizer's own and is resolved with the tokenizer "
                   "(ChatTemplate::model); by name, pick one of: " + str::join(chat_template_names(), ", "));
}

ChatTemplate ChatTemplate::chatml(std::string default_system) {
  ChatTemplate t("chatml");
  t.default_system_ = std::move(default_system);
  return t;
}

std::optional<ChatTemplate> ChatTemplate::detect(const std::string& jinja) {
  if (contains(jinja, "<|im_start|>")) {
    if (contains(jinja, "enable_thinking") && contains(jinja, "reasoning_content")) return ChatTemplate("qwen3");
    // Other reasoning ChatML templates (QwQ: forced "<think>\n") have rules we do not reproduce.
    if (contains(jinja, "<think>") || contains(jinja, "</think>")) return std::nullopt;
    return chatml(literal_default_system(jinja));
  }
  // Llama-3 (not 3.1+, whose template adds a dated system preamble and tool rules).
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|eot_id|>") &&
      !contains(jinja, "Cutting Knowledge Date"))
    return ChatTemplate("llama3");
  return std::nullopt;
}

namespace {
// Compiled templates by text: prompts are rendered one by one, the template is parsed once.
std::shared_ptr<const jinja::Template> compiled(const std::string& text, const std::string& source) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const jinja::Template>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(text);
  if (it != cache.end()) return it->second;
  auto t = std::make_shared<const jinja::Template>(jinja::Template::compile(text, source));
  if (cache.size() < 16) cache.emplace(text, t);
  return t;
}

std::string special_token(const Tokenizer& tok, int32_t id) { return id >= 0 ? tok.id_to_token(id) : ""; }
}  // namespace

ChatTemplate ChatTemplate::jinja(const std::string& text, const std::string& source, std::string bos_token,
                                 std::string eos_token) {
  ChatTemplate t("model");
  t.jinja_ = compiled(text, source);
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  return t;
}

ChatTemplate ChatTemplate::model(const Tokenizer& tok) {
  std::string text = tok.chat_template_jinja();
  if (text.empty())
    throw InputError("tokenizer " + tok.source() + " declares no chat_template (tokenizer_config.json), so " +
                     "chat_template: model has nothing to render; name one of: " +
                     str::join(chat_template_names(), ", "));
  return jinja(text, tok.source() + " chat_template", special_token(tok, tok.bos_id()),
               special_token(tok, tok.eos_id()));
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tok) { return model(tok); }

std::string ChatTemplate::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                      const nlohmann::ordered_json& variables) const {
  if (!messages.is_array()) throw InputError("chat messages must be a JSON list of {role, content} objects");
  if (!variables.is_object()) throw InputError("chat template variables must be a JSON object");
  if (!jinja_) {
    if (variables.contains("tools") && !variables["tools"].is_null())
      throw InputError("the fixed " + name_ + " chat template does not render tools; use chat_template: model");
    std::vector<ChatMessage> plain;
    for (size_t i = 0; i < messages.size(); ++i) {
      const auto& m = messages[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !m["content"].is_string())
        throw InputError("chat message " + std::to_string(i) + " needs string \"role\" and \"content\" for the " +
                         name_ + " template");
      plain.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    bool thinking = !variables.contains("enable_thinking") || variables["enable_thinking"] != false;
    return render(plain, add_generation_prompt, thinking);
  }
  nlohmann::ordered_json ctx = variables;
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (!bos_token_.empty() && !ctx.contains("bos_token")) ctx["bos_token"] = bos_token_;
  if (!eos_token_.empty() && !ctx.contains("eos_token")) ctx["eos_token"] = eos_token_;
  return jinja_->render(ctx);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 bool enable_thinking) const {
  if (jinja_) {
    auto list = nlohmann::ordered_json::array();
    for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    return render_json(list, add_generation_prompt, {{"enable_thinking", enable_thinking}});
  }
  if (name_ == "chatml") return render_chatml(messages, add_generation_prompt);
  if (name_ == "qwen3") return render_qwen3(messages, add_generation_prompt, enable_thinking);
  if (name_ == "llama3") return render_llama3(messages, add_generation_prompt);
  std::string out;
  for (const auto& m : messages) out += m.content;
  return out;
}

std::string ChatTemplate::render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (!default_system_.empty() && (messages.empty() || messages[0].role != "system"))
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    check_role(messages[i], i, {"system", "user", "assistant"}, "chatml");
    out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen3's tokenizer_config.json chat_template without tools.
std::string ChatTemplate::render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                       bool enable_thinking) const {
  const size_t n = messages.size();
  for (size_t i = 0; i < n; ++i) check_role(messages[i], i, {"system", "user", "assistant", "tool"}, "qwen3");
  std::string out;
  if (n > 0 && messages[0].role == "system") out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  // last_query_index: the last user message that is not a wrapped tool response.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    const auto& c = messages[k].content;
    bool tool_response = str::starts_with(c, "<tool_response>") && str::ends_with(c, "</tool_response>");
    if (messages[k].role == "user" && !tool_response) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string content = m.content, reasoning;
      size_t close = content.find("</think>");
      if (close != std::string::npos) {
        // content.split('</think>')[-1].lstrip('\n'), and the text between the
        // last <think> and the first </think> as the reasoning.
        std::string before = content.substr(0, close);
        content = lstrip(content.substr(content.rfind("</think>") + 8), "\n");
        size_t open = before.rfind("<think>");
        reasoning = lstrip(open == std::string::npos ? rstrip(before, "\n") : rstrip(before, "\n").substr(open + 7), "\n");
      }
      if (i > last_query && (i + 1 == n || !reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" + lstrip(rstrip(reasoning, "\n"), "\n") + "\n</think>\n\n" +
               lstrip(content, "\n");
      else
        out += "<|im_start|>assistant\n" + content;
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

// Llama-3's template: bos, then each turn with trimmed content.
std::string ChatTemplate::render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out = "<|begin_of_text|>";
  for (size_t i = 0; i < messages.size(); ++i) {
    check_role(messages[i], i, {"system", "user", "assistant", "ipython"}, "llama3");
    out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + jinja_trim(messages[i].content) +
           "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace hpcrl::io
