// Scoring a JSONL file of generated responses (see eval_responses.h). The
// file is checked whole before any score is printed, so a bad line 5000 is
// reported instead of a partial table.
#include "cli/eval_responses.h"

#include <nlohmann/json.hpp>

#include <map>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/json_errors.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::cli {
namespace {

using nlohmann::json;

const char* kExample = "{\"response\": \"... \\\\boxed{12}\", \"answer\": \"12\"}";

std::string keys_of(const json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back("'" + it.key() + "'");
  return keys.empty() ? "none" : str::join(keys, ", ");
}

const json& require(const json& row, const std::string& key, const std::string& where) {
  auto it = row.find(key);
  if (it != row.end()) return *it;
  std::vector<std::string> keys;
  for (auto k = row.begin(); k != row.end(); ++k) keys.push_back(k.key());
  std::string guess = str::closest(key, keys);
  throw InputError(where + ": missing key '" + key + "' (this line has keys: " + keys_of(row) +
                   (guess.empty() ? "" : "; did you mean '" + guess + "'?") + "); every line needs the model's " +
                   "\"response\" and the gold \"answer\", e.g. " + kExample);
}

// The answer field's gold answer: text after the last marker (GSM8K's "#### 72"), as datasets read it.
std::string gold_answer(const json& v, const std::string& marker, const std::string& where) {
  std::string field;
  if (v.is_string()) field = v.get<std::string>();
  else if (v.is_number_integer()) field = std::to_string(v.get<long long>());
  else if (v.is_number()) field = v.dump();
  else throw InputError(where + ": key 'answer' is " + std::string(v.type_name()) +
                        ", expected a string or a number such as \"12\" or 12");
  if (marker.empty()) return str::trim(field);
  size_t p = field.rfind(marker);
  if (p == std::string::npos) return str::trim(field);
  std::string after = str::trim(field.substr(p + marker.size()));
  if (after.empty())
    throw InputError(where + ": key 'answer' has '" + marker + "' with nothing after it; write the final answer " +
                     "after the marker, e.g. '" + marker + " 42'");
  return after;
}

// One non-blank line as a JSON object.
json parse_row(const std::string& line, const std::string& path, int64_t line_no, const std::string& where) {
  const json row = json_errors::parse_jsonl_line(line, path, size_t(line_no), kExample);
  if (!row.is_object())
    throw InputError(where + ": expected a JSON object, got " + std::string(row.type_name()) +
                     "; each line must be one object like " + kExample);
  return row;
}

// prompt_index must be on every line or none: the first line with one and the first without.
struct PromptIndexUse {
  int64_t with_index = 0, first_without = 0, first_with = 0;
};

// The line's prompt_index, or `next` (its position among the responses) when it has none.
int64_t prompt_index_of(const json& row, int64_t next, int64_t line_no, const std::string& path,
                        const std::string& where, PromptIndexUse& use) {
  int64_t index;
  if (auto it = row.find("prompt_index"); it != row.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 0)
      throw InputError(where + ": key 'prompt_index' is " + it->dump() + ", expected an integer >= 0 (the index "
                       "of the prompt this sample answers, as hpcrl generate writes it)");
    index = it->get<int64_t>();
    if (use.with_index++ == 0) use.first_with = line_no;
  } else {
    index = next;
    if (use.first_without == 0) use.first_without = line_no;
  }
  if (use.with_index > 0 && use.first_without > 0)
    throw InputError(path + ":" + std::to_string(std::max(use.first_with, use.first_without)) + ": line " +
                     std::to_string(use.first_with) + " has a prompt_index but line " +
                     std::to_string(use.first_without) +
                     " has none; give every line a prompt_index (to group samples for pass@k) or none");
  return index;
}

}  // namespace

ScoredResponses score_responses(const std::string& path, const reward::VerifiableReward& verifier,
                                const std::string& answer_marker) {
  std::string content = fs::read_file(path, "responses file");
  if (content.compare(0, 3, "\xEF\xBB\xBF") == 0) content.erase(0, 3);  // UTF-8 BOM
  ScoredResponses out;
  std::map<int64_t, algo::SampleCounts> groups;
  PromptIndexUse index_use;
  int64_t line_no = 0;
  double score_sum = 0;
  for (size_t pos = 0; pos < content.size();) {
    size_t eol = content.find('\n', pos);
    std::string line = content.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? content.size() : eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (str::trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    const json row = parse_row(line, path, line_no, where);
    const json& response = require(row, "response", where);
    if (!response.is_string())
      throw InputError(where + ": key 'response' is " + std::string(response.type_name()) +
                       ", expected the response text as a string");
    const std::string gold = gold_answer(require(row, "answer", where), answer_marker, where);

    ScoredLine s;
    s.line = line_no;
    s.prompt_index =
        prompt_index_of(row, static_cast<int64_t>(out.lines.size()), line_no, path, where, index_use);
    reward::RewardResult r = verifier.score(response.get<std::string>(), gold);
    s.score = r.score;
    s.correct = r.correct;
    s.extracted = r.extracted;
    s.extractor = r.extractor;
    score_sum += r.score;
    algo::SampleCounts& g = groups[s.prompt_index];
    g.n += 1;
    g.correct += r.correct ? 1 : 0;
    out.lines.push_back(std::move(s));
  }
  if (out.lines.empty())
    throw InputError(path + ": no responses (" + std::to_string(line_no) + " lines, all blank); expected one JSON " +
                     "object per line with keys 'response' and 'answer', e.g. " + kExample);
  for (const auto& [index, counts] : groups) out.prompts.push_back(counts);
  out.mean_score = score_sum / static_cast<double>(out.lines.size());
  return out;
}

}  // namespace hpcrl::cli
