// Leftmost-longest matching of added tokens with a byte trie (see tokenizer_added.h).
#include "io/tokenizer_added.h"

#include <utf8proc.h>

#include "io/tokenizer_bytes.h"

namespace hpcrl::io {
namespace {

// Letters, digits and '_' (what single_word tokens may not touch).
bool is_word_char(int32_t cp) {
  if (cp == '_') return true;
  auto cat = utf8proc_category(cp);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// Start of the code point that ends at `end` (end > 0).
size_t prev_char(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken* token, const std::string& text) {
  if (text.empty()) return;  // an empty token can never match (HF ignores it too)
  int node = 0;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    int child = -1;
    for (auto& [byte, idx] : nodes_[node].children)
      if (byte == c) child = idx;
    if (child < 0) {
      child = static_cast<int>(nodes_.size());
      nodes_[node].children.emplace_back(c, child);
      nodes_.emplace_back();
    }
    node = child;
  }
  nodes_[node].token = static_cast<int>(tokens_.size());
  tokens_.push_back({token, text.size()});
  first_byte_[static_cast<unsigned char>(text[0])] = true;
}

int AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  int node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    int child = -1;
    for (auto& [byte, idx] : nodes_[node].children)
      if (byte == c) child = idx;
    if (child < 0) break;
    node = child;
    if (nodes_[node].token >= 0) best = nodes_[node].token;
  }
  return best;
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t done = 0;  // text before this offset is already in `out`
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    int t = longest_at(text, pos);
    if (t < 0) continue;
    const AddedToken& tok = *tokens_[t].token;
    size_t start = pos, stop = pos + tokens_[t].length;
    int32_t cp = 0;
    if (tok.single_word) {
      bool word_before = start > 0 && (bytes::utf8_next(text, prev_char(text, start), &cp), is_word_char(cp));
      bool word_after = stop < text.size() && (bytes::utf8_next(text, stop, &cp), is_word_char(cp));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      // Whitespace already inside an earlier segment stays there.
      while (start > done) {
        size_t p = prev_char(text, start);
        bytes::utf8_next(text, p, &cp);
        if (!bytes::is_whitespace(cp)) break;
        start = p;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t len = bytes::utf8_next(text, stop, &cp);
        if (!bytes::is_whitespace(cp)) break;
        stop += len;
      }
    }
    if (start > done) out.push_back({done, start, -1});
    out.push_back({start, stop, tok.id});
    done = stop;
    pos = stop - 1;  // the loop's ++pos resumes right after the token
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
  return out;
}

}  // namespace hpcrl::io
