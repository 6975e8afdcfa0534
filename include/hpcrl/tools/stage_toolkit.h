// A stage's tools as its `tools:` key and the pipeline's `tools:` section
// describe them: the tool objects (a command tool's program starts at its
// first call and lives for the stage), the call format and the limits. One
// per stage and rank, shared by its rollouts, its evaluations and its prompts
// (the schemas); each generation call gets a ToolTurns over it.
#pragma once

#include <memory>
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

// Null for a stage without tools. InputError when a name is not in the
// pipeline's tools (validation reports it first).
std::unique_ptr<StageToolkit> stage_toolkit(const config::PipelineConfig& pipeline, const config::StageTools& stage);
// What a stage's prompts' template lists: the schemas of `kit`'s tools, an empty array when null.
nlohmann::ordered_json tool_schemas(const StageToolkit* kit);

}  // namespace hpcrl::tools
