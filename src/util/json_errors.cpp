// Positions and words for nlohmann::json failures (see json_errors.h).
#include "hpcrl/util/json_errors.h"

#include "hpcrl/util/error.h"

#include <algorithm>

namespace hpcrl::json_errors {
namespace {
constexpr int kNumberOverflow = 406;  // nlohmann's out_of_range id for a number a double cannot hold

// The token nlohmann quotes in "number overflow parsing '1e999'".
std::string quoted_token(const std::string& message) {
  const std::string lead = "parsing '";
  size_t start = message.find(lead);
  if (start == std::string::npos) return "";
  start += lead.size();
  size_t end = message.rfind('\'');
  return end == std::string::npos || end <= start ? "" : message.substr(start, end - start);
}
}  // namespace

size_t offset(const nlohmann::json::exception& e, std::string_view text) {
  if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
    // byte is 1-based and points at the character the lexer stopped on.
    return pe->byte == 0 ? 0 : std::min<size_t>(pe->byte - 1, text.size());
  }
  if (e.id == kNumberOverflow) {
    const std::string token = quoted_token(e.what());
    size_t at = token.empty() ? std::string_view::npos : text.find(token);
    return at == std::string_view::npos ? 0 : at;
  }
  return 0;
}

std::string problem(const nlohmann::json::exception& e) {
  if (e.id == kNumberOverflow && dynamic_cast<const nlohmann::json::out_of_range*>(&e)) {
    std::string token = quoted_token(e.what());
    return "number " + (token.empty() ? std::string("") : token + " ") +
           "is beyond the range of a double (±1.8e308)";
  }
  return e.what();
}

std::string line_col(std::string_view text, size_t offset, size_t first_line) {
  offset = std::min(offset, text.size());
  const size_t line = first_line + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  const size_t line_start = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  const size_t col = line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return std::to_string(line) + ":" + std::to_string(col);
}

nlohmann::json parse_jsonl_line(const std::string& line, const std::string& path, size_t line_no,
                                const std::string& example) {
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ":" + line_col(line, offset(e, line), line_no) + ": invalid JSON (" + problem(e) +
                     "); each line must be one JSON object, e.g. " + example);
  }
}

}  // namespace hpcrl::json_errors
