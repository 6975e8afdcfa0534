// at::parallel_for instantiated where OpenMP is on (host_threads.h says why).
#include "hpcrl/parallel/host_threads.h"

#include <ATen/Parallel.h>

#if defined(AT_PARALLEL_OPENMP) && AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "host_threads.cpp must be compiled with OpenMP (CMakeLists.txt): without it at::parallel_for runs serially"
#endif

namespace hpcrl::parallel {

void host_parallel_for_impl(int64_t begin, int64_t end, int64_t grain, void (*body)(void*, int64_t, int64_t),
                            void* context) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { body(context, b, e); });
}

}  // namespace hpcrl::parallel
