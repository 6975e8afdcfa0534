// The host allocator policy of the hpcrl process (host_memory.h).
#include "hpcrl/util/host_memory.h"

#include <cstdlib>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hpcrl::host_memory {

bool configured_by_environment(const char* glibc_tunables, const char* mmap_threshold,
                               const char* trim_threshold) {
  return (glibc_tunables && std::strstr(glibc_tunables, "glibc.malloc.")) || mmap_threshold || trim_threshold;
}

bool keep_freed_memory() {
#ifdef __GLIBC__
  if (configured_by_environment(std::getenv("GLIBC_TUNABLES"), std::getenv("MALLOC_MMAP_THRESHOLD_"),
                                std::getenv("MALLOC_TRIM_THRESHOLD_")))
    return false;
  // 4 MiB per byte of a long: glibc's DEFAULT_MMAP_THRESHOLD_MAX, the most mallopt accepts.
  const int largest_mmap_threshold = int(4 * 1024 * 1024 * sizeof(long));
  const bool threshold = mallopt(M_MMAP_THRESHOLD, largest_mmap_threshold) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;  // -1: the largest size_t, never reached
  return threshold && no_trim;
#else
  return false;
#endif
}

}  // namespace hpcrl::host_memory
