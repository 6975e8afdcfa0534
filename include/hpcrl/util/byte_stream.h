// A flat little-endian byte stream of fixed-size values and length-prefixed
// lists: the wire format of the messages between ranks (algo/training/
// sample_transfer.h) and of the in-flight state a checkpoint keeps
// (algo/stages/in_flight.h). Trivially copyable values only.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "hpcrl/util/check.h"

namespace hpcrl::util {

struct ByteWriter {
  std::vector<uint8_t> out;
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "ByteWriter::put: a trivially copyable value");
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  template <class T>
  void list(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>, "ByteWriter::list: trivially copyable values");
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(T));
  }
  void text(const std::string& s) { list(std::vector<char>(s.begin(), s.end())); }
};

// Reads what a ByteWriter wrote; InternalError (naming `what`) on a read past the end.
struct ByteReader {
  const std::vector<uint8_t>& in;
  const char* what = "message";
  size_t at = 0;

  void need(size_t n) const {
    HPCRL_CHECK(at + n <= in.size(), what << " cut short: " << in.size() << " bytes, reading " << n << " at offset "
                                          << at);
  }
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> list() {
    const auto n = get<uint64_t>();
    HPCRL_CHECK(n <= (in.size() - at) / sizeof(T), what << " cut short: a list of " << n << " values at offset " << at
                                                        << " of " << in.size() << " bytes");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), in.data() + at, n * sizeof(T));
    at += n * sizeof(T);
    return v;
  }
  std::string text() {
    auto c = list<char>();
    return std::string(c.begin(), c.end());
  }
  // InternalError when bytes are left after the last value.
  void finish() const { HPCRL_CHECK(at == in.size(), what << " has " << in.size() - at << " bytes past its end"); }
};

}  // namespace hpcrl::util
