// Added tokens ("<|im_start|>", "<think>", "<|begin_of_text|>") are matched in
// the text before anything else, so they become single ids and are never cut
// by the pre-tokenizer or BPE. Matching is leftmost-longest over all added
// tokens, as HF's AddedVocabulary does, honouring each token's flags:
// lstrip/rstrip absorb whitespace beside the match, single_word requires word
// boundaries, and `normalized` tokens are matched after normalisation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpcrl::io {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false, rstrip = false, normalized = false, single_word = false;
};

class AddedTokenMatcher {
 public:
  // Matches `text` (the token's content, or its normalised form) as `token`,
  // which must outlive the matcher.
  void add(const AddedToken* token, const std::string& text);
  bool empty() const { return tokens_.empty(); }

  // A run of text: an added token (id >= 0) or plain text (id == -1).
  struct Segment {
    size_t begin, end;
    int32_t id;
  };
  // Cuts `text` (valid UTF-8) into plain runs and added tokens, in order;
  // whitespace absorbed by lstrip/rstrip belongs to the token's segment.
  std::vector<Segment> split(std::string_view text) const;

 private:
  // Index of the longest token matching at text[pos], or -1.
  int longest_at(std::string_view text, size_t pos) const;

  struct Node {
    std::vector<std::pair<unsigned char, int>> children;
    int token = -1;  // index into tokens_ of the token ending here
  };
  std::vector<Node> nodes_{Node{}};
  struct Entry {
    const AddedToken* token;
    size_t length;  // bytes of the matched text
  };
  std::vector<Entry> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace hpcrl::io
