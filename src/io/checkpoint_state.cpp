// state.json and complete.json, parsed and checked (see checkpoint_state.h).
#include "hpcrl/io/checkpoint_state.h"

#include <limits>

#include "hpcrl/io/dataset_cursor.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/json_errors.h"

namespace hpcrl::io {
namespace {
using nlohmann::json;

const char* const kDamaged = "; the checkpoint is damaged: resume from an earlier step directory or start over";

json parse_object(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(where + ":" + json_errors::line_col(text, json_errors::offset(e, text)) + ": not valid JSON (" +
                     json_errors::problem(e) + ")" + kDamaged);
  }
  if (!j.is_object()) throw InputError(where + ": expected a JSON object, got " + std::string(j.type_name()) + kDamaged);
  return j;
}

// A JSON value for a message: at most 60 characters of it.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

int64_t count_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned() ||
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw InputError(where + ": \"" + key + "\" must be a non-negative integer, got " +
                     (it == j.end() ? std::string("nothing") : brief(*it)) + kDamaged);
  return it->get<int64_t>();
}
}  // namespace

json parse_checkpoint_state(std::string_view text, const std::string& where) {
  json state = parse_object(text, where);
  count_field(state, "step", where);
  if (auto l = state.find("layout"); l != state.end() && !l->is_object())
    throw InputError(where + ": \"layout\" must be an object of role layouts, got " + brief(*l) + kDamaged);
  if (auto c = state.find("cursor"); c != state.end()) (void)DataCursor::from_json(*c, where);
  if (auto r = state.find("rng"); r != state.end()) {
    bool bytes = r->is_array();
    for (size_t i = 0; bytes && i < r->size(); ++i) bytes = (*r)[i].is_number_unsigned() && (*r)[i].get<uint64_t>() <= 255;
    if (!bytes) throw InputError(where + ": \"rng\" must be a list of bytes (integers 0..255)" + std::string(kDamaged));
  }
  return state;
}

StageRecord parse_stage_record(std::string_view text, const std::string& where) {
  json j = parse_object(text, where);
  StageRecord r;
  r.steps = count_field(j, "steps", where);
  if (auto a = j.find("eval_accuracy"); a != j.end() && a->is_number()) r.eval_accuracy = a->get<double>();
  return r;
}

}  // namespace hpcrl::io
