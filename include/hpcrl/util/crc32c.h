// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of
// TensorBoard's record framing and of every file a checkpoint manifest lists.
// A checkpoint is gigabytes, so this runs at memory speed: the SSE4.2 crc32
// instruction where the processor has it (checked at run time), slicing-by-8
// tables otherwise. Both give the same value; the tests pin the standard
// check value ("123456789" → 0xE3069283).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hpcrl::util {

// The CRC of `data`.
uint32_t crc32c(std::string_view data);

// Continues `crc` (the CRC of what came before; 0 for nothing) over `n` more
// bytes, so a file can be checksummed in blocks: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

// Bytes and CRC of a whole file, read in blocks. InputError naming the path
// when it cannot be opened or read.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
FileDigest file_digest(const std::string& path);

}  // namespace hpcrl::util
