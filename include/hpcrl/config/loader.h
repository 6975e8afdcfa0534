// Loading a pipeline file: read the YAML, apply `--set` overrides, decode into
// the typed PipelineConfig (config/pipeline_config.h) and validate it — all
// errors in one pass, each as `file:line:col: key.path: message; fix`.
//
//   auto cfg = config::load_pipeline_config("configs/quickstart.yaml", {"run.seed=3"}, {.world = 4});
//
// Overrides are `a.b.c=value` (the value is YAML: `stages[1].grpo.clip=[0.2,0.28]`);
// list items are addressed as `stages[1]` or `stages.1`. An override is typed
// and validated exactly like the file, and its errors name `--set a.b.c=value`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/config/diagnostics.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

struct ValidateOptions {
  int64_t world = 0;             // ranks the job will have; 0 = unknown (layout checks that need it are skipped)
  bool require_weights = false;  // false (validate): a missing weight file is a warning; true (run): an error
};

struct LoadResult {
  PipelineConfig config;         // complete only when ok()
  Diagnostics diagnostics;       // every error and warning found
  bool ok() const { return diagnostics.ok(); }
};

// Never throws on bad input: everything wrong is in `diagnostics`.
LoadResult check_pipeline_config(const std::string& path, const std::vector<std::string>& overrides,
                                 const ValidateOptions& options);
// The same for YAML text; `label` stands in for the file name in positions.
LoadResult check_pipeline_text(const std::string& yaml, const std::string& label,
                               const std::vector<std::string>& overrides, const ValidateOptions& options);

// Throws ConfigError (an InputError listing every error) unless the file is valid;
// warnings are logged (spdlog::warn).
PipelineConfig load_pipeline_config(const std::string& path, const std::vector<std::string>& overrides,
                                    const ValidateOptions& options);

// Every key path the schema knows, e.g. "models.<role>.parallel.tp", "stages[].sft.steps".
std::vector<std::string> schema_key_paths();

}  // namespace hpcrl::config
