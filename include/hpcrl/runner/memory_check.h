// Refuses, before anything is allocated, a run that clearly cannot fit in this node's
// memory: the plan's peak bytes of the ranks on this node (hpcrl plan's per-rank memory)
// against what the node can still give them. The plan counts model state, activations,
// logits, the KV cache and the gradient buffers (within 6 % of allocated peaks,
// docs/zero.md); a process also holds libraries and what the allocator keeps, which the
// plan does not count, so a run the plan already puts past the memory available cannot
// fit and is refused; one close below it may still fail and is left to run.
// run.check_memory: false turns the check off (docs/config.md). CPU runs only: a GPU's
// memory is not read here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::runner {

// Bytes this process can still allocate: the least of MemAvailable (/proc/meminfo), the
// cgroup's memory.max less memory.current, and RLIMIT_AS less the process's VmSize;
// nullopt when none can be read.
std::optional<int64_t> allocatable_bytes();

// The message for a plan of `needed` bytes on `ranks_here` ranks against `available`;
// "" when it fits.
std::string memory_refusal(int64_t needed, int64_t available, int ranks_here, const std::string& biggest_role);

// InputError with memory_refusal's text when the plan's peak for the ranks on this node
// (the block of local_size ranks that holds `rank`) exceeds allocatable_bytes().
void check_memory_fits(const config::PipelineConfig& cfg, int world, int rank, int local_rank, int local_size);

}  // namespace hpcrl::runner
