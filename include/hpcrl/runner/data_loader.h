// Materialises a pipeline's datasets: the synthetic task (generated from the
// seed) or JSONL files, with length limits applied in tokens of the tokenizer
// of the role that will read them. Every rank builds the same lists (the data
// is small next to the models; sharding happens by index in the samplers).
#pragma once

#include "hpcrl/algo/training/stage_env.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/io/tokenizer.h"

namespace hpcrl::runner {

algo::DataSplits load_data_splits(const config::DatasetConfig& data, const config::RunConfig& run,
                                  const io::Tokenizer& tokenizer);

}  // namespace hpcrl::runner
