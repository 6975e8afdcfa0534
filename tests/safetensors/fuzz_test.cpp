// A small deterministic mutation fuzzer for the safetensors parser: thousands of
// mutants of one valid file (bit flips, edited numbers, extreme values, swapped
// dtypes, cut files, wrong length fields). Each must either parse into a header
// whose every tensor lies inside the buffer (then all its bytes are read, so
// AddressSanitizer sees any overrun) or throw InputError naming the file —
// nothing else. Each mutant sits in an exactly sized heap block for ASan.
#include <gtest/gtest.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <set>

#include "hpcrl/io/safetensors.h"
#include "hpcrl/io/safetensors_writer.h"
#include "st_helpers.h"

using namespace hpcrl;
using namespace hpcrl::io;

namespace {

constexpr int kIterations = 6000;
const std::string kPath = "fuzz.safetensors";

std::vector<uint8_t> valid_file() {
  st_test::ScratchDir dir;
  std::vector<float> a(12, 0.5f);
  std::vector<uint16_t> b(5, 7);
  std::vector<int64_t> c{1, -2};
  double s = 3.25;
  write_safetensors(
      dir.file("base.safetensors"),
      {tensor_from_bytes("model.layers.0.w", Dtype::F32, {3, 4}, a.data()),
       tensor_from_bytes("model.norm", Dtype::BF16, {5}, b.data()), tensor_from_bytes("ids", Dtype::I64, {2}, c.data()),
       tensor_from_bytes("empty", Dtype::U8, {0, 3}, nullptr), tensor_from_bytes("scale", Dtype::F64, {}, &s)},
      {{"format", "pt"}});
  return st_test::read_bytes(dir.file("base.safetensors"));
}

class Mutator {
 public:
  explicit Mutator(const std::vector<uint8_t>& base) : base_(base) {
    for (int i = 7; i >= 0; --i) header_len_ = (header_len_ << 8) | base[i];
  }

  std::vector<uint8_t> next(std::mt19937_64& rng) {
    std::string header(base_.begin() + 8, base_.begin() + 8 + header_len_);
    std::vector<uint8_t> data(base_.begin() + 8 + header_len_, base_.end());
    uint64_t length = header_len_;
    auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
    switch (rng() % 11) {
      case 0:  // bit flips
        for (int k = 0, n = 1 + pick(4); k < n; ++k) header[pick(header.size())] ^= static_cast<char>(1 << pick(8));
        break;
      case 1:  // one digit becomes another number-ish character
        if (auto pos = positions(header, "0123456789"); !pos.empty())
          header[pos[pick(pos.size())]] = "0123456789-.eE+"[pick(15)];
        break;
      case 2:  // stray structural character
        header.insert(pick(header.size() + 1), 1, "{}[],:\"\\ 0123456789aF"[pick(22)]);
        break;
      case 3:  // a piece cut out
        header.erase(pick(header.size()), 1 + pick(12));
        break;
      case 4: {  // the file cut short (header length left as it was)
        std::vector<uint8_t> out = base_;
        out.resize(pick(base_.size()));
        return out;
      }
      case 5: {  // a wrong length field
        const uint64_t choices[] = {
            rng(),        header_len_ + 1 + pick(64), header_len_ - 1 - pick(8), 0, base_.size() - 8,
            base_.size(), kMaxHeaderBytes + 1};
        length = choices[pick(7)];
        return assemble(length, header, data);
      }
      case 6: {  // a number replaced by an extreme one
        static const char* extremes[] = {"18446744073709551615",
                                         "18446744073709551616",
                                         "-1",
                                         "9223372036854775807",
                                         "9223372036854775808",
                                         "4294967296",
                                         "1e308",
                                         "0",
                                         "-0",
                                         "2.5",
                                         "99999999999999999999999"};
        auto pos = positions(header, "0123456789");
        if (pos.empty()) break;
        size_t at = pos[pick(pos.size())], end = at;
        while (at > 0 && isdigit(static_cast<unsigned char>(header[at - 1]))) --at;
        while (end < header.size() && isdigit(static_cast<unsigned char>(header[end]))) ++end;
        header.replace(at, end - at, extremes[pick(11)]);
        break;
      }
      case 7: {  // a dtype swapped for another, or for a near miss
        static const char* dtypes[] = {"F32", "BF16", "F16", "I64", "U8", "BOOL", "F64", "F8_E4M3", "F4", "f32", ""};
        size_t at = nth(header, "\"dtype\":\"", pick(5));
        if (at == std::string::npos) break;
        at += 9;
        header.replace(at, header.find('"', at) - at, dtypes[pick(11)]);
        break;
      }
      case 8: {  // a tensor's range moved, its size kept: overlaps and out-of-range ends
        size_t at = nth(header, "\"data_offsets\":[", pick(5));
        if (at == std::string::npos) break;
        at += 16;
        size_t close = header.find(']', at);
        uint64_t b = 0, e = 0;
        if (std::sscanf(header.c_str() + at, "%" SCNu64 ",%" SCNu64, &b, &e) != 2) break;
        int64_t delta = static_cast<int64_t>(pick(129)) - 64;
        if (delta < 0 && static_cast<uint64_t>(-delta) > b) delta = -static_cast<int64_t>(b);
        header.replace(at, close - at, std::to_string(b + delta) + "," + std::to_string(e + delta));
        break;
      }
      case 9: {  // a key renamed away
        static const char* keys[] = {"\"dtype\"", "\"shape\"", "\"data_offsets\""};
        const char* key = keys[pick(3)];
        size_t at = nth(header, key, pick(5));
        if (at != std::string::npos) header.replace(at + 1, 1, "x");
        break;
      }
      case 10:  // valid JSON, but not an object
        header = "[" + header + "]";
        break;
    }
    if (rng() % 4 != 0) length = header.size();  // usually keep the length field consistent
    return assemble(length, header, data);
  }

 private:
  // Start of the k-th occurrence of `what` (the last one when there are fewer).
  static size_t nth(const std::string& s, const std::string& what, size_t k) {
    size_t at = s.find(what);
    while (at != std::string::npos && k-- > 0) {
      size_t again = s.find(what, at + 1);
      if (again == std::string::npos) break;
      at = again;
    }
    return at;
  }
  static std::vector<size_t> positions(const std::string& s, const char* chars) {
    std::vector<size_t> out;
    for (size_t i = 0; i < s.size(); ++i)
      if (std::strchr(chars, s[i])) out.push_back(i);
    return out;
  }
  static std::vector<uint8_t> assemble(uint64_t length, const std::string& header, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> out = st_test::le64(length);
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }

  std::vector<uint8_t> base_;
  uint64_t header_len_ = 0;
};

}  // namespace

TEST(SafetensorsFuzz, MutatedFilesParseOrFailCleanly) {
  std::vector<uint8_t> base = valid_file();
  ASSERT_NO_THROW(parse_safetensors(base.data(), base.size(), kPath));
  Mutator mutator(base);
  std::mt19937_64 rng(20240611);
  int accepted = 0, rejected = 0, failures = 0;
  std::set<std::string> seen;  // which checks fired, by a distinctive phrase
  const char* phrases[] = {"too short",     "header length", "not valid JSON",
                           "unknown dtype", "needs",         "end past the data section",
                           "overlap",       "missing key",   "must be a JSON object"};
  for (int it = 0; it < kIterations && failures < 5; ++it) {
    std::vector<uint8_t> mutant = mutator.next(rng);
    // An exactly sized heap block: reading one byte past it is an ASan error.
    size_t n = mutant.size();
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n == 0 ? 1 : n]);
    if (n) std::memcpy(buf.get(), mutant.data(), n);
    try {
      SafetensorsHeader h = parse_safetensors(buf.get(), n, kPath);
      ++accepted;
      for (const TensorInfo& t : h.tensors) {
        ASSERT_LE(t.end, h.data_size) << "iteration " << it << " tensor " << t.name;
        ASSERT_EQ(h.data_start + h.data_size, n);
        ASSERT_EQ(static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype), t.nbytes());
        unsigned sum = 0;
        for (uint64_t i = 0; i < t.nbytes(); ++i) sum += buf[h.data_start + t.begin + i];
        (void)sum;
      }
    } catch (const InputError& e) {
      ++rejected;
      std::string m = e.what();
      if (m.rfind(kPath + ": ", 0) != 0) {
        ++failures;
        ADD_FAILURE() << "iteration " << it << ": message does not start with the file name: " << m;
      }
      for (const char* p : phrases)
        if (m.find(p) != std::string::npos) seen.insert(p);
    } catch (const std::exception& e) {
      ++failures;
      ADD_FAILURE() << "iteration " << it << ": not an InputError: " << e.what();
    }
  }
  std::cout << "[ fuzz     ] " << accepted << " mutants accepted, " << rejected << " rejected\n";
  EXPECT_EQ(accepted + rejected, kIterations);
  // The mutants must reach both outcomes and every layer of validation.
  EXPECT_GT(accepted, kIterations / 50);
  EXPECT_GT(rejected, kIterations / 2);
  for (const char* p : phrases) EXPECT_TRUE(seen.count(p)) << "no mutant reached the check saying \"" << p << "\"";
}
