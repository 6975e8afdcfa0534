// The BPE model of a byte-level tokenizer.json: vocabulary and merge ranks,
// applied to one pre-tokenized word at a time. Works on raw bytes (vocab
// entries are mapped back from GPT-2's byte characters at load time). Merges
// are applied lowest rank first, leftmost first among equal ranks — the order
// HF tokenizers' Word::merge_all uses — with a heap, so long words (runs of
// spaces, minified code) stay O(n log n). Results are cached per word.
#pragma once

#include <array>
#include <cstdint>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hpcrl::io {

class BpeModel {
 public:
  // `ignore_merges` (Llama-3): a word that is itself a vocab entry is emitted
  // as that one token without running merges.
  explicit BpeModel(bool ignore_merges) : ignore_merges_(ignore_merges) {}
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Building (the loader validates ids and tokens): vocab entries as raw bytes.
  void reserve(size_t tokens, size_t merges) {
    vocab_.reserve(tokens);
    merges_.reserve(merges);
  }
  void add_token(std::string bytes, int32_t id) { vocab_.emplace(std::move(bytes), id); }
  // Merges in rank order; a repeated pair keeps the later rank (as HF does).
  void add_merge(int32_t left, int32_t right, int32_t merged);
  // -1 when `bytes` is not a vocab entry.
  int32_t lookup(std::string_view bytes) const;
  // Resolves the 256 single-byte tokens; returns the bytes that have none.
  std::vector<int> finish();

  // Appends the ids of `word` (raw bytes, non-empty) to *out.
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;

 private:
  void merge(std::string_view word, std::vector<int32_t>* out) const;
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct Merge {
    int32_t rank, merged;
  };

  bool ignore_merges_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};

  // Word → ids. Bounded: once full, new words are computed but not stored.
  static constexpr size_t kCacheWords = 100000;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace hpcrl::io
