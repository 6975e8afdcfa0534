// Pre-tokenization for byte-level BPE: PCRE2 splits (see tokenizer_pretokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"

namespace hpcrl::io {
namespace {

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

// One JIT stack per thread: the JIT's default 32 KiB is too small for long
// runs of whitespace under `\s+(?!\S)`; a stack may not be shared by threads.
struct ThreadMatchContext {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchContext() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchContext() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
};

}  // namespace

std::shared_ptr<Regex> Regex::compile(const std::string& pattern, bool literal, std::string* error,
                                      std::string origin) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL admits no character-class options; UCP only matters for classes anyway.
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &code,
                                 &offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof(buf));
    *error = std::string(reinterpret_cast<const char*>(buf)) + " at pattern offset " + std::to_string(offset);
    return nullptr;
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is unavailable
  std::shared_ptr<Regex> r(new Regex());
  r->code_ = re;
  r->origin_ = std::move(origin);
  return r;
}

Regex::~Regex() { pcre2_code_free(as_code(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  thread_local ThreadMatchContext tmc;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(as_code(code_), nullptr), &pcre2_match_data_free);
  std::vector<std::pair<size_t, size_t>> matches;
  auto subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos < subject.size()) {
    // Callers validate UTF-8 once; PCRE2 need not re-check at every offset.
    int rc = pcre2_match(as_code(code_), subj, subject.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), tmc.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof(buf));
      // A pattern that backtracks too far on some text hits PCRE2's match or depth limit.
      throw InputError(origin_ + ": the pre-tokenizer regex failed on a text of " + std::to_string(subject.size()) +
                       " bytes (PCRE2: " + reinterpret_cast<const char*>(buf) +
                       "); the pattern backtracks too far on this input: simplify it, or shorten the text");
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t start = ov[0], end = ov[1];
    if (end > start) {
      matches.emplace_back(start, end);
      pos = end;
    } else {
      // An empty match yields no word (HF drops empty pieces): step one character on.
      pos = start + 1;
      while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  return matches;
}

const char* PreTokenizer::gpt2_pattern() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

PreTokenizer PreTokenizer::from_json(const tokjson::json& j, const tokjson::Where& w) {
  PreTokenizer p;
  if (j.is_null())
    tokjson::fail(w, "is null, so this is not a byte-level BPE tokenizer",
                  "hpcrl supports byte-level BPE (a ByteLevel pre_tokenizer, as in GPT-2, Qwen, Llama-3, DeepSeek)");
  p.parse(j, w, true);
  if (!p.byte_level_)
    tokjson::fail(w, "has no ByteLevel step, so this is not a byte-level BPE tokenizer",
                  "hpcrl supports byte-level BPE (GPT-2, Qwen, Llama-3, DeepSeek); SentencePiece-style "
                  "tokenizers (Metaspace pre-tokenizer) are not supported");
  return p;
}

void PreTokenizer::parse(const tokjson::json& j, const tokjson::Where& w, bool last) {
  std::string type = tokjson::require_string(tokjson::require(j, w, "type"), w.at("type"));
  if (type == "Sequence") {
    auto ws = w.at("pretokenizers");
    const auto& list = tokjson::require_array(tokjson::require(j, w, "pretokenizers"), ws);
    for (size_t i = 0; i < list.size(); ++i) parse(list[i], ws.at(i), last && i + 1 == list.size());
  } else if (type == "Split") {
    Step s;
    auto wp = w.at("pattern");
    const auto& pat = tokjson::require_object(tokjson::require(j, w, "pattern"), wp);
    bool literal = pat.contains("String");
    if (!literal && !pat.contains("Regex"))
      tokjson::fail(wp, "needs a \"Regex\" or \"String\" key", "write {\"Regex\": \"...\"}");
    auto wr = wp.at(literal ? "String" : "Regex");
    std::string source = tokjson::require_string(pat[literal ? "String" : "Regex"], wr);
    std::string error;
    s.regex = Regex::compile(source, literal, &error, wr.file + ": " + wr.path);
    if (!s.regex) tokjson::fail(wr, "the regex does not compile: " + error, "fix the pattern (PCRE2 syntax)");
    std::string behavior = tokjson::require_string(tokjson::require(j, w, "behavior"), w.at("behavior"));
    if (behavior != "Isolated" && behavior != "Removed")
      tokjson::fail(w.at("behavior"), "Split behavior '" + behavior + "' is not supported",
                    "hpcrl supports \"Isolated\" and \"Removed\"");
    s.remove_matches = behavior == "Removed";
    if (tokjson::optional_bool(j, w, "invert", false))
      tokjson::fail(w.at("invert"), "inverted Split patterns are not supported", "use \"invert\": false");
    steps_.push_back(std::move(s));
  } else if (type == "ByteLevel") {
    if (!last)
      tokjson::fail(w, "ByteLevel is not the last pre-tokenizer step",
                    "hpcrl needs ByteLevel last (as in every GPT-2/Qwen/Llama-3 file)");
    Step s;
    s.add_prefix_space = tokjson::optional_bool(j, w, "add_prefix_space", true);
    if (tokjson::optional_bool(j, w, "use_regex", true)) {
      std::string error;
      s.regex = Regex::compile(gpt2_pattern(), false, &error);
      HPCRL_CHECK(s.regex, "built-in GPT-2 pattern does not compile: " << error);
    }
    steps_.push_back(std::move(s));
    byte_level_ = true;
  } else {
    tokjson::fail(w.at("type"), "pre-tokenizer '" + type + "' is not supported",
                  "hpcrl supports byte-level BPE pre-tokenizers: ByteLevel, Split (Isolated/Removed) and "
                  "Sequence of them");
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string>* out) const {
  std::vector<std::string> cur{std::string(text)}, next;
  for (const Step& step : steps_) {
    next.clear();
    for (std::string& word : cur) {
      if (word.empty()) continue;
      // ByteLevel prepends its space before its own regex runs (HF order).
      if (step.add_prefix_space && (word.empty() || word[0] != ' ')) word.insert(word.begin(), ' ');
      if (!step.regex) {
        next.push_back(std::move(word));
        continue;
      }
      size_t prev = 0;
      for (auto [start, end] : step.regex->find_all(word)) {
        if (start > prev) next.emplace_back(word, prev, start - prev);
        if (!step.remove_matches) next.emplace_back(word, start, end - start);
        prev = end;
      }
      if (prev < word.size()) next.emplace_back(word, prev, word.size() - prev);
    }
    cur.swap(next);
  }
  for (auto& word : cur) out->push_back(std::move(word));
}

}  // namespace hpcrl::io
