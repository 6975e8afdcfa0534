// The optimizer settings of the ZeRO equivalence tests (zero3_mpi_test,
// zero_pipeline_mpi_test): a learning rate that moves the weights visibly in a
// few steps, weight decay, and a clip threshold below the gradient norms those
// steps reach, so that the sharded clip factor and decay are exercised too.
#pragma once

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::testing {

inline config::TrainHparams zero_test_hparams() {
  config::TrainHparams hp;
  hp.lr = 3e-3;
  hp.weight_decay = 0.1;
  hp.grad_clip = 0.05;  // below the norms of these steps: the clip factor is exercised
  return hp;
}

}  // namespace hpcrl::testing
