// Dataset length policy and report (see dataset.h). The length function is
// the caller's tokenizer (with the chat template applied if the caller wants
// the templated prompt counted), so limits mean what the model will see.
#include "hpcrl/io/dataset.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include <sstream>

#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::io {

std::string DatasetReport::summary() const {
  std::ostringstream os;
  os << rows << " rows, kept " << kept;
  if (blank_lines) os << "; skipped " << blank_lines << " blank lines";
  if (dropped_long_prompt) os << "; dropped " << dropped_long_prompt << " with a prompt over the token limit";
  if (dropped_long_response) os << "; dropped " << dropped_long_response << " with a response over the token limit";
  if (truncated_response) os << "; truncated " << truncated_response << " responses to the token limit";
  if (!note.empty()) os << "; " << note;
  return os.str();
}

uint64_t content_hash(const Dataset& ds) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](const std::string& text) {
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0u) * 1099511628211ull;  // the field's end
  };
  for (const auto& ex : ds.examples) {
    add(ex.prompt);
    add(ex.response);
    add(ex.answer);
  }
  return h;
}

LongResponsePolicy parse_long_response_policy(const std::string& name, const std::string& where) {
  if (name == "filter") return LongResponsePolicy::kFilter;
  if (name == "truncate") return LongResponsePolicy::kTruncate;
  std::string msg = where + ": unknown long-response policy '" + name + "'";
  std::string guess = str::closest(name, {"filter", "truncate"});
  if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
  throw InputError(msg + "; use 'filter' (drop the example) or 'truncate' (cut the response)");
}

std::string truncate_to_tokens(const std::string& text, size_t max_tokens, const LengthFn& length) {
  if (length(text) <= max_tokens) return text;
  // Candidate cut points: UTF-8 character starts (never inside a code point).
  std::vector<size_t> cuts;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  }
  // Invariant: prefix(cuts[lo]) fits (cuts[0] = 0, the empty prefix), the whole
  // text (index cuts.size()) does not. Token counts of prefixes are monotone
  // up to BPE merge effects at the cut, which at worst cost one extra character.
  size_t lo = 0, hi = cuts.size();
  auto fits = [&](size_t k) { return length(text.substr(0, cuts[k])) <= max_tokens; };
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return text.substr(0, cuts.empty() ? 0 : cuts[lo]);
}

void apply_length_limits(Dataset& ds, const LengthLimits& limits) {
  bool limited = limits.max_prompt_tokens > 0 || limits.max_response_tokens > 0;
  HPCRL_CHECK(!limited || limits.length, "dataset " << ds.name << ": token limits set but no length function; "
                                                    << "pass the tokenizer's length to LengthLimits::length");
  DatasetReport& rep = ds.report;
  if (limited) {
    std::vector<Example> kept;
    kept.reserve(ds.examples.size());
    for (Example& ex : ds.examples) {
      if (limits.max_prompt_tokens > 0 && limits.length(ex.prompt) > limits.max_prompt_tokens) {
        ++rep.dropped_long_prompt;
        continue;
      }
      if (limits.max_response_tokens > 0 && !ex.response.empty() &&
          limits.length(ex.response) > limits.max_response_tokens) {
        if (limits.long_response == LongResponsePolicy::kFilter) {
          ++rep.dropped_long_response;
          continue;
        }
        ex.response = truncate_to_tokens(ex.response, limits.max_response_tokens, limits.length);
        // Inserted ranges end at the cut; those after it go.
        for (auto& r : ex.inserted) r.second = std::min(r.second, ex.response.size());
        ex.inserted.erase(std::remove_if(ex.inserted.begin(), ex.inserted.end(),
                                         [](const auto& r) { return r.first >= r.second; }),
                          ex.inserted.end());
        ++rep.truncated_response;
      }
      kept.push_back(std::move(ex));
    }
    ds.examples = std::move(kept);
  }
  rep.kept = ds.examples.size();
  if (ds.examples.empty() && rep.rows > 0) {
    std::ostringstream os;
    os << "dataset " << ds.name << ": all " << rep.rows << " examples were dropped by the length limits (";
    if (rep.dropped_long_prompt) os << rep.dropped_long_prompt << " prompts > " << limits.max_prompt_tokens << " tokens ";
    if (rep.dropped_long_response) {
      os << rep.dropped_long_response << " responses > " << limits.max_response_tokens << " tokens";
    }
    os << "); raise max_prompt_tokens / max_response_tokens or use long_response: truncate";
    throw InputError(os.str());
  }
  if (rep.dropped_long_prompt || rep.dropped_long_response || rep.truncated_response) {
    spdlog::warn("dataset {}: {}", ds.name, rep.summary());
  } else {
    spdlog::info("dataset {}: {}", ds.name, rep.summary());
  }
}

}  // namespace hpcrl::io
