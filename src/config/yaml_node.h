// The YAML document as the config loader sees it: a small tree of null /
// scalar / sequence / mapping nodes, each with the SourcePos it was written at.
// yaml-cpp's own nodes are converted into this once, right after parsing,
// because (1) yaml-cpp silently keeps duplicate keys, which we must report,
// (2) `--set` overrides need to graft new values carrying "--set a.b=v" as
// their position, and (3) a mapping here keeps its keys in file order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hpcrl/config/diagnostics.h"

namespace hpcrl::config {

struct YEntry;

struct YNode {
  enum class Kind { kNull, kScalar, kSeq, kMap };
  Kind kind = Kind::kNull;
  std::string scalar;          // kScalar: the text as written (without quotes)
  bool quoted = false;         // kScalar: written in quotes (so it is a string, never a number)
  SourcePos pos;
  std::vector<YNode> items;    // kSeq
  std::vector<YEntry> entries; // kMap, file order, duplicates already removed

  bool is_null() const { return kind == Kind::kNull; }
  bool is_scalar() const { return kind == Kind::kScalar; }
  bool is_seq() const { return kind == Kind::kSeq; }
  bool is_map() const { return kind == Kind::kMap; }
  const YNode* find(const std::string& key) const;
  YNode* find(const std::string& key);
  // "a mapping", "a list", "no value", "'text'": how error messages name what was found.
  std::string describe() const;

  static YNode scalar_node(std::string text, bool quoted = false);
  static YNode map_node();
  static YNode seq_node();
};

struct YEntry {
  std::string key;
  SourcePos key_pos;
  YNode value;
};

// Parses YAML text. On a syntax error, several documents, a non-mapping top
// level, non-scalar keys or duplicate keys, appends errors to `diag`; returns
// the tree when it could be built (duplicate-key errors still return it).
// `set_arg` non-empty: the text is an override value; every node's position is that argument.
std::optional<YNode> parse_yaml_text(const std::string& text, const std::string& file, Diagnostics& diag,
                                     const std::string& set_arg = "");

// Reads `path` and parses it; a missing file, a directory, an unreadable,
// binary or empty file is an error in `diag` (and nullopt).
std::optional<YNode> parse_yaml_file(const std::string& path, Diagnostics& diag);

// YAML text of a tree (block style; flow style for lists of scalars).
std::string emit_yaml(const YNode& root);

}  // namespace hpcrl::config
