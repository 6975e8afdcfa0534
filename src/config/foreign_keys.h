// Keys other RL trainers (veRL, TRL, OpenRLHF, the HF Trainer, DeepSpeed)
// use, and the hpcrl key each means: one table, consulted where the schema
// reports an unknown key (schema_scalars.cpp), checked against the schema and
// against docs/config.md's table by tests/config/foreign_keys_test.cpp.
//
//   stages[1].grpo.max_response_length: unknown key 'max_response_length'; did you mean 'max_new_tokens'?
//   (the veRL key max_response_length is hpcrl's stages[1].grpo.max_new_tokens)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::config {

struct ForeignKey {
  std::string key;                  // as the other tool writes it; "a.b" = key b inside a mapping a
  std::vector<std::string> scopes;  // schema paths of the mappings it is recognised in ("" = top level)
  std::string target;               // the hpcrl key: a schema path, "{here}.x" = x in the same mapping
  std::string tools;                // whose key it is: "veRL", "TRL / HF Trainer", ...
  std::string note;                 // how the meanings differ, or what else to write ("" when they match)
};

const std::vector<ForeignKey>& foreign_keys();

// A path in schema form: list indices dropped and user-chosen names replaced by
// their placeholders ("stages[2].grpo.kl" -> "stages[].grpo.kl",
// "models.policy.optim" -> "models.<role>.optim").
std::string schema_path(const std::string& path);

// `target` of `entry` written for the mapping at `scope` (a schema path): {here} replaced.
std::string target_in(const ForeignKey& entry, const std::string& scope);

struct ForeignKeyHint {
  std::string sibling;  // the hpcrl key's name when it sits in the same mapping, else ""
  std::string fix;      // "did you mean 'max_new_tokens'? (the veRL key ... is hpcrl's ...)"
};

// docs/config.md's table "their key -> hpcrl key", one row per entry, header included.
std::string foreign_keys_markdown();

// The hint for the unknown key at `path` (e.g. "stages[1].grpo.max_response_length"), if the table knows it there.
std::optional<ForeignKeyHint> foreign_key_hint(const std::string& path);

}  // namespace hpcrl::config
