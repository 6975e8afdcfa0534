// What the process's C allocator does with host memory it frees.
#pragma once

namespace hpcrl::host_memory {

// Keeps the host memory the process frees with the C allocator for its next
// allocations instead of returning it to the kernel.
//
// Precondition: called first thing in main, before other threads allocate.
// Why: a CPU training step allocates and frees its activations and gradients
// every micro-batch. glibc hands blocks above its mmap threshold back with
// munmap and trims the heap's free top, so the next micro-batch faults every
// page in again and the kernel zeroes each one. On the quickstart's GRPO
// iterations (256 rows in one micro-batch) that churn took most of the actor
// update: 5.1–5.2 s per iteration against 1.2 s with the memory kept, and the
// whole quickstart 345 s against 157 s (docs/results.md). The cost is that the process's
// resident memory stays at its peak instead of shrinking between phases.
//
// Sets glibc's mmap threshold to its largest value (32 MiB on 64-bit hosts:
// smaller blocks come from the heap, where they are reused) and turns heap
// trimming off. Leaves the allocator alone where the environment configures
// glibc's malloc (GLIBC_TUNABLES naming glibc.malloc, MALLOC_MMAP_THRESHOLD_ or
// MALLOC_TRIM_THRESHOLD_) and where the C library is not glibc. Returns
// whether it changed anything.
bool keep_freed_memory();

// Whether those environment values (null: unset) configure glibc's malloc.
bool configured_by_environment(const char* glibc_tunables, const char* mmap_threshold,
                               const char* trim_threshold);

}  // namespace hpcrl::host_memory
