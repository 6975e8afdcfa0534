// Byte-level BPE merges with a rank heap and a per-word cache (see bpe_model.h).
#include "io/bpe_model.h"

#include <mutex>
#include <queue>

namespace hpcrl::io {

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged) {
  merges_[key(left, right)] = Merge{static_cast<int32_t>(merges_.size()), merged};
}

int32_t BpeModel::lookup(std::string_view bytes) const {
  auto it = vocab_.find(std::string(bytes));
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<int> BpeModel::finish() {
  std::vector<int> missing;
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = lookup(std::string(1, static_cast<char>(b)));
    if (byte_ids_[b] < 0) missing.push_back(b);
  }
  return missing;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    int32_t id = lookup(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock<std::shared_mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge(word, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock<std::shared_mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheWords) cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge(std::string_view word, std::vector<int32_t>* out) const {
  // Doubly linked list of symbols; a merged-away symbol has id -1.
  struct Symbol {
    int32_t id, prev, next;
  };
  const int n = static_cast<int>(word.size());
  if (n == 0) return;
  std::vector<Symbol> sym(n);
  for (int i = 0; i < n; ++i) sym[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};

  struct Candidate {
    int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int pos) {
    int nxt = sym[pos].next;
    if (nxt < 0) return;
    auto it = merges_.find(key(sym[pos].id, sym[nxt].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    // Stale entry: the left symbol was merged away, or either side changed since it was queued.
    if (left.id < 0 || left.next < 0) continue;
    auto it = merges_.find(key(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.merged != c.merged || it->second.rank != c.rank) continue;
    Symbol& right = sym[left.next];
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

}  // namespace hpcrl::io
