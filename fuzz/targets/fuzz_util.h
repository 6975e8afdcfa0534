// What the fuzz targets share: a private scratch directory for parsers that
// read files, and the one outcome a parser of user input may have besides
// success — an InputError (exit 2 with a message). Anything else escaping a
// target (another exception, a crash, a sanitizer report, a leak, an
// allocation over -malloc_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace hpcrl::fuzz {

// A directory of this process's own, removed at exit.
inline const std::string& scratch_dir() {
  struct Scratch {
    std::string dir;
    Scratch() {
      const char* tmp = std::getenv("TMPDIR");
      dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/hpcrl-fuzz-XXXXXX";
      if (!::mkdtemp(dir.data())) std::abort();
    }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const Scratch scratch;
  return scratch.dir;
}

// Writes `bytes` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The input as text, and split at its first NUL byte into two parts (the
// second empty when there is none): how targets that read two things (a
// tokenizer and a text to encode) take them from one input.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view in) {
  const size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return {in, {}};
  return {in.substr(0, nul), in.substr(nul + 1)};
}

}  // namespace hpcrl::fuzz
