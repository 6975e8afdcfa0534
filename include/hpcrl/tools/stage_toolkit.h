// A GRPO/PPO stage's tools as its `tools:` key and the pipeline's `tools:`
// section describe them: the tool objects (a command tool's program starts at
// its first call and lives for the stage), the call format and the limits.
// One per generating rank; each generation call gets a ToolTurns over it.
#pragma once

#include <vector>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/tools/tool.h"
#include "hpcrl/tools/tool_call.h"
#include "hpcrl/tools/tool_turns.h"

namespace hpcrl::tools {

struct StageToolkit {
  std::vector<ToolPtr> tools;  // in the stage's `use` order
  ToolCallFormat format;
  ToolLimits limits;
  // The tools' schemas, as a chat template's `tools` variable lists them.
  nlohmann::ordered_json schemas() const;
};

// InputError when a name is not in the pipeline's tools (validation reports it first).
StageToolkit stage_toolkit(const config::PipelineConfig& pipeline, const config::StageTools& stage);
// The schemas of a stage's tools (an empty array without tools): what its prompts' template lists.
nlohmann::ordered_json stage_tool_schemas(const config::PipelineConfig& pipeline, const config::StageTools& stage);

}  // namespace hpcrl::tools
