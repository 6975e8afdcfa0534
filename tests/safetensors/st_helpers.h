// Shared helpers of the safetensors tests: a scratch directory per test, raw
// safetensors bytes built by hand (so corrupt files can be made without a
// writer that refuses them), and an assertion that a call throws InputError
// whose message contains given fragments. Torch-free: the ASan job uses it too.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "hpcrl/util/error.h"

namespace st_test {

namespace stdfs = std::filesystem;

// A fresh directory named after the running test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = stdfs::temp_directory_path() / ("hpcrl_st_" + std::string(info->test_suite_name()) + "_" + info->name() +
                                            "_" + std::to_string(::getpid()));
    stdfs::remove_all(path_);
    stdfs::create_directories(path_);
  }
  ~ScratchDir() { stdfs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const stdfs::path& path() const { return path_; }

 private:
  stdfs::path path_;
};

inline std::vector<uint8_t> le64(uint64_t v) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

// [u64 LE length][header][data]; `length` overrides the length field when given.
inline std::vector<uint8_t> raw_safetensors(const std::string& header, size_t data_bytes, int64_t length = -1) {
  std::vector<uint8_t> out = le64(length >= 0 ? static_cast<uint64_t>(length) : header.size());
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Runs `fn`, requires an InputError, and returns its message with every fragment checked.
inline std::string expect_input_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const hpcrl::InputError& e) {
    std::string m = e.what();
    for (const auto& f : fragments) EXPECT_NE(m.find(f), std::string::npos) << "missing \"" << f << "\" in: " << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return "";
}

}  // namespace st_test
