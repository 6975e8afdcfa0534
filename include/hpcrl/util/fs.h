// File-system helpers that keep the "nothing half-written" promise: every file
// hpcrl produces is written to a temporary name beside its target and renamed
// into place, so a crash leaves either the old file or the new one.
#pragma once

#include <string>

namespace hpcrl::fs {

// Writes `content` to `path` atomically (tmp file + fsync + rename). Creates parent dirs.
void write_file_atomic(const std::string& path, const std::string& content);

// Reads a whole regular file. InputError naming the path when it is missing,
// a directory, or unreadable.
std::string read_file(const std::string& path, const std::string& what = "file");

// A unique temporary sibling name for `path` (same directory, so rename is atomic).
std::string temp_sibling(const std::string& path);

}  // namespace hpcrl::fs
