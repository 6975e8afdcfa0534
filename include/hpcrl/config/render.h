// The two ways a loaded pipeline is shown back to people: as YAML with every
// default and inherited value written out (the runner saves it as
// runs/NAME/config.resolved.yaml; loading it again gives the same config), and
// as the short summary `hpcrl validate` prints (roles with their layout and
// architecture, stages, ranks needed).
#pragma once

#include <string>

#include "hpcrl/config/loader.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

std::string to_yaml(const PipelineConfig& config);

std::string summarize(const PipelineConfig& config, const ValidateOptions& options);

}  // namespace hpcrl::config
