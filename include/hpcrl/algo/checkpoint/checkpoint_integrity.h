// Checksums of checkpoint files (io/checkpoint_manifest.h) written with every
// step directory and checked before --resume loads one. The work is shared:
// each rank reads and checksums every world-size-th file, so a checkpoint of
// many optimizer shards costs each rank about its own share of the bytes.
#pragma once

#include <string>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

// Collective over `world`. Precondition: every file of the step is complete
// (the ranks have passed a barrier after writing and rank 0 has written
// state.json), because the checksums describe the step as it is to stay.
// Rank 0 writes `step_dir`/manifest.json.
void write_checkpoint_manifest(const std::string& step_dir, const dist::CommPtr& world);

// Collective over `world`: the newest step directory of `stage_dir` whose
// files all match its manifest ("" when the stage has none). A step without a
// manifest (written before hpcrl recorded checksums) is taken with a warning.
// A damaged newer step is named in a warning and renamed step-NNNNNN.damaged
// (kept for inspection, out of the way of pruning and the next resume), and
// the run continues from the older intact step. InputError naming every
// damaged file when no step is intact.
std::string resumable_checkpoint(const std::string& stage_dir, const dist::CommPtr& world);

}  // namespace hpcrl::algo
