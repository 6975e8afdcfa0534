// The host allocator policy (host_memory.h): freed memory stays with the
// allocator, and an environment that configures glibc's malloc wins.
#include <gtest/gtest.h>

#include <cstdlib>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "hpcrl/util/host_memory.h"

namespace {

using hpcrl::host_memory::configured_by_environment;

TEST(HostMemory, TheEnvironmentConfiguresMallocOnlyThroughItsMallocSettings) {
  EXPECT_FALSE(configured_by_environment(nullptr, nullptr, nullptr));
  EXPECT_FALSE(configured_by_environment("glibc.rtld.nns=2", nullptr, nullptr));
  EXPECT_TRUE(configured_by_environment("glibc.malloc.trim_threshold=0", nullptr, nullptr));
  EXPECT_TRUE(configured_by_environment("glibc.rtld.nns=2:glibc.malloc.arena_max=1", nullptr, nullptr));
  EXPECT_TRUE(configured_by_environment(nullptr, "131072", nullptr));
  EXPECT_TRUE(configured_by_environment(nullptr, nullptr, "0"));
}

#ifdef __GLIBC__
TEST(HostMemory, AFreedBlockStaysWithTheAllocator) {
  if (configured_by_environment(std::getenv("GLIBC_TUNABLES"), std::getenv("MALLOC_MMAP_THRESHOLD_"),
                                std::getenv("MALLOC_TRIM_THRESHOLD_")))
    GTEST_SKIP() << "the environment configures glibc's malloc";
  ASSERT_TRUE(hpcrl::host_memory::keep_freed_memory());
  // 16 MiB: above glibc's default mmap threshold (128 KiB), so without the policy
  // it is mmapped and its pages go back to the kernel when freed.
  const size_t bytes = size_t(16) << 20;
  const size_t free_before = mallinfo2().fordblks;
  void* block = std::malloc(bytes);
  ASSERT_NE(block, nullptr);
  static_cast<volatile char*>(block)[0] = 1;
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, free_before + bytes) << "the freed block should stay in the heap, free for reuse";
}
#endif

}  // namespace
