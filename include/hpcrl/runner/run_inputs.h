// Every file a run reads besides its pipeline file, loaded and checked before
// the run directory is touched: each dataset a stage draws from (every row
// parsed, length limits applied, and every kept row measured against the
// context of the models that read it), each role's tokenizer, and — for
// `validate`, which builds no model — each init.path checkpoint's safetensors
// headers. `run` loads the init weights in full (role_builder) before the run
// directory too, so bad input of any kind exits 2 with nothing written, and a
// run directory replaced with --force is only replaced once all of it is good.
#pragma once

#include <map>
#include <string>

#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::runner {

struct RunInputs {
  std::map<std::string, algo::DataSplits> data;  // by dataset name: the datasets some stage reads
};

// InputError naming the file, the row (FILE:LINE) and the fix on the first
// problem. Rows are tokenized with the tokenizer of the role that reads them;
// a role whose tokenizer directory lacks tokenizer.json (a config that ships
// only config.json, which `validate` accepts with a warning) skips the length
// checks when `lengths_optional`.
RunInputs load_run_inputs(const config::PipelineConfig& cfg, bool lengths_optional = false);

// `validate`'s check of init weights without building a model: every
// init.path role whose weights exist opens as a checkpoint (headers, index,
// and every tensor's bytes inside its file, so a truncated download is found),
// and its embedding has the vocabulary and width config.json gives.
void check_weight_files(const config::PipelineConfig& cfg);

}  // namespace hpcrl::runner
