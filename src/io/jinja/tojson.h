// HF's `tojson` filter: Python's json.dumps(x, ensure_ascii=False,
// indent=indent, sort_keys=sort_keys) with its default separators
// (", " and ": " on one line; "," and ": " when indenting).
#pragma once

#include <string>

#include "io/jinja/value.h"

namespace hpcrl::io::jinja {

// indent < 0: one line. Undefined and callables are refused (Failure).
std::string to_json_text(const Value& v, int indent, bool sort_keys);

}  // namespace hpcrl::io::jinja
