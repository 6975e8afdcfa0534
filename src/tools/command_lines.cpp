// The text side of the command tool (command_lines.h).
#include "tools/command_lines.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "hpcrl/util/strings.h"

namespace hpcrl::tools::detail {

namespace {
using Json = nlohmann::json;
constexpr size_t kShownBytes = 200;          // of a bad line, in messages
constexpr size_t kTailInResultBytes = 400;   // of the stderr tail, in a result the model reads
}  // namespace

namespace {
// An environment's reply: an optional string "observation", numeric "reward" and boolean "done".
void environment_reply(const Json& j, Reply& r) {
  const auto observation = j.find("observation"), reward = j.find("reward"), done = j.find("done");
  if (observation != j.end() && !observation->is_string())
    r.problem = "has an \"observation\" that is not a string";
  else if (reward != j.end() && !reward->is_number())
    r.problem = "has a \"reward\" that is not a number";
  else if (done != j.end() && !done->is_boolean())
    r.problem = "has a \"done\" that is not true or false";
  if (!r.problem.empty()) return;
  if (observation != j.end()) r.result.text = observation->get<std::string>();
  if (reward != j.end()) r.result.reward = reward->get<double>();
  if (done != j.end()) r.result.done = done->get<bool>();
}
}  // namespace

Reply parse_reply(const std::string& line, const std::string& tool, size_t max_bytes, bool environment) {
  Reply r;
  const Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded()) return r.problem = "is not JSON", r;
  if (!j.is_object()) return r.problem = "is not a JSON object", r;
  const auto id = j.find("id");
  if (id == j.end() || !id->is_number_integer()) return r.problem = "has no integer \"id\"", r;
  r.id = id->get<int64_t>();
  const auto error = j.find("error"), content = j.find("content");
  const bool is_error = error != j.end() && error->is_string();
  if (environment && !is_error) {
    environment_reply(j, r);
    if (r.result.text.size() > max_bytes)
      r.result = {"tool " + tool + ": its observation of " + std::to_string(r.result.text.size()) +
                      " bytes is over max_reply_bytes = " + std::to_string(max_bytes),
                  true};
    return r;
  }
  if (!is_error && (content == j.end() || !content->is_string()))
    return r.problem = "has neither a string \"content\" nor a string \"error\"", r;
  const std::string& text = (is_error ? error : content)->get_ref<const std::string&>();
  if (text.size() > max_bytes)
    r.result = {"tool " + tool + ": its reply of " + std::to_string(text.size()) +
                    " bytes is over max_reply_bytes = " + std::to_string(max_bytes),
                true};
  else
    r.result = is_error ? ToolResult{"tool " + tool + ": " + text, true} : ToolResult{text, false};
  return r;
}

std::string shown(const std::string& s) {
  if (s.size() <= kShownBytes) return s;
  size_t cut = kShownBytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream os;
  os << static_cast<double>(ms.count()) / 1000.0;
  return os.str();
}

std::string command_line(const std::vector<std::string>& argv) {
  if (argv.size() == 3 && argv[0] == "sh" && argv[1] == "-c") return argv[2];
  return str::join(argv, " ");
}

size_t line_cap(size_t max_reply_bytes) {
  const size_t most = std::numeric_limits<size_t>::max();
  return max_reply_bytes > (most - 4096) / 6 ? most : max_reply_bytes * 6 + 4096;
}

std::string dumped(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string tail_in_result(std::string tail) {
  if (tail.empty()) return "nothing";
  if (tail.size() > kTailInResultBytes) tail = "..." + tail.substr(tail.size() - kTailInResultBytes);
  std::replace(tail.begin(), tail.end(), '\n', '|');
  return tail;
}

}  // namespace hpcrl::tools::detail
