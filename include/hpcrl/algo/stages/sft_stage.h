// Supervised fine-tuning: prompt-masked cross-entropy on the dataset's
// responses (loss on response tokens only), AdamW with the stage's schedule,
// micro-batches with gradient accumulation, data-parallel gradient averaging
// overlapped with backward, periodic held-out evaluation, checkpoints and
// exact resume. The loss is normalised by the global number of response
// tokens in the step, so any dp/sp/micro-batch split gives the same update.
#pragma once

#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::algo {

StageResult run_sft(StageEnv& env);

}  // namespace hpcrl::algo
