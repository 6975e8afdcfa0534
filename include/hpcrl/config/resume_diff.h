// What --resume compares: the pipeline a run was started with (its saved
// config.resolved.yaml) against the one it is resumed with, key by key, both
// with every default written out. A resumed run continues the saved steps,
// data cursors and optimizer state, which only mean the same thing under the
// same config, so any difference is refused unless the key is one that
// changes nothing a checkpoint holds (resume_safe_keys()).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

struct ConfigDifference {
  std::string key;    // "stages[0].sft.steps"
  std::string saved;  // the value as YAML ("200"), "(absent)" when the key is not there
  std::string now;
};

// Key paths that may differ on resume: how often checkpoints are written and
// how many are kept, what is traced, how long a command reward may take, and
// the run's name and directory (the directory is the one being resumed).
const std::vector<std::string>& resume_safe_keys();

// Differences between two resolved configs outside resume_safe_keys(), in key order.
std::vector<ConfigDifference> resume_differences(const PipelineConfig& saved, const PipelineConfig& now);

// "stages[0].sft.steps (saved 200, now 20), ..." — at most `shown` entries, then a count.
std::string describe(const std::vector<ConfigDifference>& diffs, size_t shown = 8);

}  // namespace hpcrl::config
