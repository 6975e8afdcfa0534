// CRC-32C, hardware or sliced (see crc32c.h).
#include "hpcrl/util/crc32c.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "hpcrl/util/error.h"

namespace hpcrl::util {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

// table[k][b]: the CRC of byte b followed by k zero bytes, for slicing-by-8.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPoly : 0u);
    t[0][i] = crc;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  return t;
}
constexpr Tables kTables = make_tables();

uint32_t sliced(uint32_t crc, const unsigned char* p, size_t n) {
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;  // little-endian: the running CRC meets the first four bytes
    crc = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFFu] ^ kTables[2][(hi >> 8) & 0xFFu] ^
          kTables[1][(hi >> 16) & 0xFFu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = kTables[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) uint32_t hardware(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
bool have_hardware() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#else
uint32_t hardware(uint32_t crc, const unsigned char* p, size_t n) { return sliced(crc, p, n); }
bool have_hardware() { return false; }
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = have_hardware() ? hardware(crc, p, n) : sliced(crc, p, n);
  return ~crc;
}

uint32_t crc32c(std::string_view data) { return crc32c_extend(0, data.data(), data.size()); }

FileDigest file_digest(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw InputError(path + ": cannot be read (" + std::strerror(errno) + ")");
  constexpr size_t kBlock = size_t{1} << 20;
  std::unique_ptr<unsigned char[]> buf(new unsigned char[kBlock]);
  FileDigest d;
  size_t got;
  while ((got = std::fread(buf.get(), 1, kBlock, f.get())) > 0) {
    d.crc32c = crc32c_extend(d.crc32c, buf.get(), got);
    d.bytes += got;
  }
  if (std::ferror(f.get())) throw InputError(path + ": read error after " + std::to_string(d.bytes) + " bytes");
  return d;
}

}  // namespace hpcrl::util
