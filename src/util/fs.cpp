// Atomic writes and checked reads (see fs.h).
#include "hpcrl/util/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "hpcrl/util/error.h"

namespace hpcrl::fs {
namespace stdfs = std::filesystem;

std::string temp_sibling(const std::string& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::ostringstream os;
  os << path << ".tmp-" << ::getpid() << "-" << std::hex << rng();
  return os.str();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  stdfs::path p(path);
  if (p.has_parent_path()) stdfs::create_directories(p.parent_path());
  std::string tmp = temp_sibling(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw RuntimeError("cannot write " + tmp + ": " + std::strerror(errno) +
                       " (check that the directory is writable and the disk is not full)");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw RuntimeError("write failed for " + tmp + ": " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw RuntimeError("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!stdfs::exists(path, ec)) throw InputError(what + " not found: " + path + " (check the path)");
  if (stdfs::is_directory(path, ec))
    throw InputError(what + " " + path + " is a directory; give the path of a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace hpcrl::fs
