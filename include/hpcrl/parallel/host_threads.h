// Splitting a loop over the host's intra-op threads (at::get_num_threads()).
//
// Use this, not at::parallel_for, in hpcrl's sources. LibTorch's OpenMP
// at::parallel_for is a header template whose `#pragma omp parallel` is
// compiled into the caller's translation unit: in a file built without
// -fopenmp (all of hpcrl's, which share the torch precompiled header) the
// pragma is dropped and the whole range runs on the calling thread, whatever
// the thread count. This wrapper's one translation unit is built with OpenMP
// (CMakeLists.txt), so the engine's GEMMs, packing, attention, sampling and
// the fused AdamW pass really use the threads they are given.
#pragma once

#include <cstdint>

namespace hpcrl::parallel {

// Runs body(context, chunk_begin, chunk_end) over chunks that cover
// [begin, end), each at least `grain` long (but the last), on up to
// at::get_num_threads() threads; on the calling thread alone when the range is
// one chunk or the caller is already inside a parallel region. Chunks write
// disjoint outputs: the body must not depend on how the range is split.
void host_parallel_for_impl(int64_t begin, int64_t end, int64_t grain, void (*body)(void*, int64_t, int64_t),
                            void* context);

template <typename F>
void host_parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  host_parallel_for_impl(begin, end, grain,
                         [](void* context, int64_t b, int64_t e) { (*static_cast<const F*>(context))(b, e); },
                         const_cast<F*>(&f));
}

}  // namespace hpcrl::parallel
