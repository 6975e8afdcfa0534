// Distillation: a student learns a teacher's next-token distributions (forward
// KL, reverse KL or generalised JSD) on dataset responses or on its own
// generations (on-policy), or the teacher's generated answers with the SFT loss
// (sequence-level). The teacher's distribution is taken over its top-k tokens
// (k from the config) gathered across its vocabulary shards, so teacher and
// student may have different tensor-parallel layouts; the full vocabulary is
// used when top_k = 0 and both sit on one tp rank. Spans:
// distill/teacher_forward, distill/student_update (and distill/rollout on-policy).
#pragma once

#include "hpcrl/algo/training/stage_env.h"

namespace hpcrl::algo {

StageResult run_distill(StageEnv& env);

}  // namespace hpcrl::algo
