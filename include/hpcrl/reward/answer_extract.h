// Finding the final answer in a model response. Each extractor recognises one
// convention and returns the raw answer text (normalisation is a separate
// step, answer_normalize.h); the reward tries them in a configured order and
// the first that finds something wins:
//   boxed       the LAST \boxed{…} (or \fbox{…}), nested braces allowed; an
//               unclosed last one (a truncated response) finds nothing
//   answer_tag  the last <answer>…</answer>
//   answer_is   the last "answer is X" / "answer: X" / "answer = X" (any case,
//               also "answer will/would be X"): X is the rest of that line up to
//               the end of the sentence
//   hash        the last "#### X" (GSM8K): the rest of that line
//   last_number the last number in the text (fallback; \frac{a}{b} counts)
// Extractors look at bytes only; they never allocate more than the answer.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::reward {

enum class Extractor { kBoxed, kAnswerTag, kAnswerIs, kHash, kLastNumber };

// "boxed", "answer_tag", "answer_is", "hash", "last_number".
const char* extractor_name(Extractor e);
std::vector<std::string> extractor_names();

// Parses a config name; InputError naming `where` (e.g. "rewards.math.extract[2]"),
// the valid names and a "did you mean" suggestion.
Extractor parse_extractor(const std::string& name, const std::string& where);

// A whole `extract:` list; InputError on an unknown or repeated name or an
// empty list, naming `where` and the index.
std::vector<Extractor> parse_extractors(const std::vector<std::string>& names, const std::string& where);

// boxed, answer_tag, hash, answer_is, last_number — explicit markers before
// the guesswork, GSM8K's "####" before free-text "the answer is".
std::vector<Extractor> default_extractors();

std::optional<std::string> extract_boxed(const std::string& text);
std::optional<std::string> extract_answer_tag(const std::string& text);
std::optional<std::string> extract_answer_is(const std::string& text);
std::optional<std::string> extract_hash(const std::string& text);
std::optional<std::string> extract_last_number(const std::string& text);
std::optional<std::string> extract_with(Extractor e, const std::string& text);

struct Extraction {
  std::string answer;  // raw (trimmed) answer text
  Extractor by;
};

// The first extractor in `order` that finds a non-empty answer.
std::optional<Extraction> extract_answer(const std::string& text, const std::vector<Extractor>& order);

}  // namespace hpcrl::reward
