// Conversation rows as SFT examples (dataset_conversation.h).
#include "hpcrl/io/dataset_conversation.h"

#include "hpcrl/util/error.h"
#include "io/jinja/tojson.h"
#include "io/jinja/value.h"

namespace hpcrl::io {
namespace {

using Json = nlohmann::ordered_json;

std::string at_message(const std::string& where, size_t i) { return where + ": message " + std::to_string(i); }

std::string role_of(const Json& m, const std::string& at) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
    throw InputError(at + ": expected an object with a string \"role\" (user, assistant or tool) and \"content\"");
  return m["role"].get<std::string>();
}

// A message's content: a string, or (an assistant's with tool_calls) absent or null.
std::string content_of(const Json& m, const std::string& at, bool may_be_empty) {
  const auto it = m.find("content");
  if (it != m.end() && it->is_string()) return it->get<std::string>();
  if (may_be_empty && (it == m.end() || it->is_null())) return "";
  throw InputError(at + ": \"content\" must be a string; fix the row");
}

// OpenAI's tool_calls (one entry) as Qwen's templates write a call.
std::string written_call(const Json& calls, const std::string& at) {
  if (!calls.is_array() || calls.size() != 1)
    throw InputError(at + ": \"tool_calls\" must hold exactly one call: hpcrl's rollouts make one call per turn; "
                          "split the message");
  const Json& call = calls[0].contains("function") ? calls[0]["function"] : calls[0];
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string())
    throw InputError(at + ": a tool call needs {\"function\": {\"name\": ..., \"arguments\": ...}}; fix the row");
  Json arguments = call.value("arguments", Json::object());
  if (arguments.is_string()) {  // OpenAI writes the arguments as JSON text
    arguments = Json::parse(arguments.get<std::string>(), nullptr, false);
    if (arguments.is_discarded())
      throw InputError(at + ": the call's \"arguments\" text is not JSON; write an object or its JSON text");
  }
  const Json body = {{"name", call["name"]}, {"arguments", arguments}};
  return "<tool_call>\n" + jinja::to_json_text(jinja::Value::from_json(body), -1, false) + "\n</tool_call>";
}

std::string assistant_text(const Json& m, const std::string& at) {
  const bool has_call = m.contains("tool_calls") && !m["tool_calls"].is_null();
  std::string text = content_of(m, at, has_call);
  if (has_call) text += (text.empty() ? "" : "\n") + written_call(m["tool_calls"], at);
  return text;
}
}  // namespace

void read_conversation(const Json& messages, const ConversationFormat& format, const std::string& where,
                       Example& ex) {
  if (!messages.is_array() || messages.size() < 2)
    throw InputError(where + ": a conversation must be a list of at least a user and an assistant message");
  const std::string first = role_of(messages[0], at_message(where, 0));
  if (first == "system")
    throw InputError(at_message(where, 0) + ": a system message in a conversation is not built; the dataset's "
                                            "system_prompt: gives every row one. Remove it from the row");
  if (first != "user")
    throw InputError(at_message(where, 0) + ": a conversation starts with the user's message, not '" + first + "'");
  ex.prompt = content_of(messages[0], at_message(where, 0), false);
  ex.response.clear();
  ex.inserted.clear();
  std::string previous = "user";
  for (size_t i = 1; i < messages.size(); ++i) {
    const std::string at = at_message(where, i);
    const std::string role = role_of(messages[i], at);
    if (role == "assistant") {
      if (previous == "assistant")
        throw InputError(at + ": two assistant messages in a row; a tool's reply goes between them (or join them)");
      ex.response += assistant_text(messages[i], at);
    } else if (role == "tool") {
      if (previous != "assistant")
        throw InputError(at + ": a tool message must follow the assistant message that called it (" + previous +
                         " before it); hpcrl's rollouts answer one call per turn");
      const size_t begin = ex.response.size();
      ex.response += format.reply_open + content_of(messages[i], at, false) + format.reply_close;
      ex.inserted.emplace_back(begin, ex.response.size());
    } else {
      throw InputError(at + ": role '" + role + "' after the first message; conversations with several user turns " +
                       "(or other roles) are not built: one user message, then assistant and tool messages");
    }
    previous = role;
  }
  if (previous != "assistant")
    throw InputError(at_message(where, messages.size() - 1) +
                     ": the conversation ends with a tool message; its last message must be the assistant's answer");
}

}  // namespace hpcrl::io
