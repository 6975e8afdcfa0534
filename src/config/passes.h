// The loader's passes after decoding, in order (loader.cpp runs them):
//   apply_overrides   `--set a.b=v` grafted onto the YAML tree (before decoding)
//   resolve_defaults  values that default to other values (run.name from the
//                     file name, a stage's eval_every from run.eval_every, a
//                     rollout layout from the training layout, tokenizers)
//   validate_models   init sources, architectures, weights, tokenizers,
//                     placement and every role's layout
//   validate_stages   what stages refer to and how roles are used
#pragma once

#include <string>
#include <vector>

#include "config/yaml_node.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

void apply_overrides(YNode& root, const std::vector<std::string>& overrides, const std::string& file,
                     Diagnostics& diag);
void resolve_defaults(PipelineConfig& config);
void validate_models(PipelineConfig& config, const ValidateOptions& options, Diagnostics& diag);
void validate_stages(const PipelineConfig& config, const ValidateOptions& options, Diagnostics& diag);
// The tools a stage uses exist and fit its responses; unsupported combinations (validate_tools.cpp).
void validate_tools(const PipelineConfig& config, Diagnostics& diag);

// "did you mean" over the names of a section, or the list of what exists.
std::string name_fix(const std::string& name, const std::vector<std::string>& known, const std::string& section);

}  // namespace hpcrl::config
