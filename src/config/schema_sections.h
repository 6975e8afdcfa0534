// The codec of each top-level section of a pipeline file (schema.h explains
// codecs). One file per section family: schema_run.cpp (run, trace, placement,
// the top level), schema_models.cpp (models, rewards), schema_data.cpp,
// schema_stages.cpp.
#pragma once

#include "config/schema.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config::schema {

Codec<RunConfig> run_codec();
Codec<TraceConfig> trace_codec();
Codec<PlacementConfig> placement_codec();
Codec<std::vector<ModelConfig>> models_codec();
Codec<std::vector<RewardConfig>> rewards_codec();
Codec<std::vector<ToolConfig>> tools_codec();  // schema_tools.cpp
// `command: "python score.py"` (through sh -c) or an argv list: the command reward and tool.
Codec<std::vector<std::string>> command_codec();
Codec<StageTools> stage_tools_codec();
Codec<std::vector<DatasetConfig>> data_codec();
Codec<std::vector<StageConfig>> stages_codec();
Codec<ParallelConfig> parallel_codec(bool training);  // rollout layouts take only tp, sp, ep, pp

// Run names become directory names: letters, digits, '.', '_', '-', not starting with '.'.
bool valid_run_name(const std::string& name);

// The whole file.
const Codec<PipelineConfig>& pipeline_codec();

}  // namespace hpcrl::config::schema
