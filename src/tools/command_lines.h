// The text side of the command tool (command_tool.h): judging one reply line
// of the program, and the pieces of the messages a model or a user reads.
// Private to the tools module.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/tools/tool.h"

namespace hpcrl::tools::detail {

// One reply line, judged. `problem` non-empty: not a reply at all (the line "is not JSON", ...).
struct Reply {
  std::string problem;
  int64_t id = 0;
  ToolResult result;  // the content, or the program's error, or its reply over max_bytes
};
// `environment`: the environment form (command_tool.h): "observation" instead of "content" (optional),
// and an optional numeric "reward" and boolean "done".
Reply parse_reply(const std::string& line, const std::string& tool, size_t max_bytes, bool environment = false);

// The first 200 bytes of `s` (cut at a UTF-8 boundary), with its size when cut.
std::string shown(const std::string& s);
std::string seconds_text(std::chrono::milliseconds ms);  // "0.2"
// What was run: the shell command of `sh -c CMD`, else the argv joined.
std::string command_line(const std::vector<std::string>& argv);
// The longest reply line: a content of max_reply_bytes, JSON-escaped (6 bytes a byte at most), and 4 KiB more.
size_t line_cap(size_t max_reply_bytes);
std::string dumped(const nlohmann::ordered_json& j);  // one line, invalid UTF-8 replaced
// The end of a stderr tail (400 bytes) on one line, for a result the model reads.
std::string tail_in_result(std::string tail);

}  // namespace hpcrl::tools::detail
