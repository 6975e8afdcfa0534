// Where and why nlohmann::json gave up on a text, for messages that name
// FILE:LINE:COL. nlohmann reports syntax errors with a byte offset but a
// number beyond a double (`1e999`) as an out_of_range error with no position
// at all; a parser that catches only parse_error lets that one through as a
// bare "number overflow parsing '1e999'". Catch nlohmann::json::exception and
// ask these two functions instead.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace hpcrl::json_errors {

// The 0-based offset in `text` where parsing failed: the character a syntax
// error stopped at, or the start of the number that overflowed (found by its
// spelling, which the message quotes). 0 when the error carries no position.
size_t offset(const nlohmann::json::exception& e, std::string_view text);

// The problem in words: nlohmann's message for syntax errors, and for an
// overflowing number "number 1e999 is beyond the range of a double (±1.8e308)".
std::string problem(const nlohmann::json::exception& e);

// "LINE:COL" (1-based) of byte `offset` of `text`; `first_line` is the line
// number of the text's first line (a JSONL row is one line of a larger file).
std::string line_col(std::string_view text, size_t offset, size_t first_line = 1);

// Line `line_no` of JSONL file `path` parsed; InputError "PATH:LINE:COL: invalid
// JSON (problem); each line must be one JSON object, e.g. EXAMPLE" when it is not JSON.
nlohmann::json parse_jsonl_line(const std::string& line, const std::string& path, size_t line_no,
                                const std::string& example);

}  // namespace hpcrl::json_errors
