// Checkpoint manifests: what is written parses back, anything else is refused
// with the place, and every way a file can differ from its entry is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hpcrl/io/checkpoint_manifest.h"
#include "hpcrl/util/crc32c.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

using namespace hpcrl;
namespace stdfs = std::filesystem;

namespace {

std::string error_of(const std::string& text) {
  try {
    io::parse_manifest(text, "M");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// A step directory with one file, "a/w.bin" = "123456789" (crc32c e3069283).
struct StepDir {
  std::string path = testing::TempDir() + "/step-" + std::to_string(::getpid());
  StepDir() {
    stdfs::remove_all(path);
    fs::write_file_atomic(path + "/a/w.bin", "123456789");
  }
  ~StepDir() { stdfs::remove_all(path); }
  io::ManifestEntry entry() const { return {"a/w.bin", 9, 0xE3069283u}; }
};

}  // namespace

TEST(Manifest, WrittenManifestParsesBack) {
  io::Manifest m{{"state.json", 120, 0x0badf00du}, {"policy/model.safetensors", 4096, 0xE3069283u}};
  io::Manifest back = io::parse_manifest(io::format_manifest(m), "M");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].path, "policy/model.safetensors");
  EXPECT_EQ(back[1].bytes, 4096u);
  EXPECT_EQ(back[1].crc32c, 0xE3069283u);
  EXPECT_NE(io::format_manifest(m).find("\"crc32c\": \"0badf00d\""), std::string::npos);  // 8 lower-case hex digits
}

TEST(Manifest, PathsLeavingTheStepDirectoryAreRefused) {
  const std::string head = R"({"format": "hpcrl-checkpoint-manifest", "version": 1, "files": [{"path": )";
  const std::string tail = R"(, "bytes": 1, "crc32c": "00000000"}]})";
  for (const char* p : {"\"../state.json\"", "\"/etc/passwd\"", "\"a//b\"", "\"a/./b\"", "\"\""})
    EXPECT_NE(error_of(head + p + tail).find("M: files[0]: \"path\" must be a relative path inside the step directory"),
              std::string::npos)
        << p;
}

TEST(Manifest, MalformedEntriesNameTheProblem) {
  const std::string head = R"({"format": "hpcrl-checkpoint-manifest", "version": 1, "files": [)";
  EXPECT_NE(error_of(head + R"({"path": "a", "bytes": -1, "crc32c": "00000000"}]})").find("\"bytes\" must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"path": "a", "bytes": 1, "crc32c": "0000000G"}]})").find("8 lower-case hex digits"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"path": "a", "bytes": 1, "crc32c": "00000000"}, {"path": "a", "bytes": 1, "crc32c": "00000000"}]})")
                .find("M: files[1]: 'a' is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "other", "version": 1, "files": []})").find("not an hpcrl checkpoint manifest"),
            std::string::npos);
  EXPECT_NE(error_of("{\n\"format\": 1e999}").find("M:2:11: not valid JSON (number 1e999 is beyond"), std::string::npos)
      << error_of("{\n\"format\": 1e999}");
}

TEST(Manifest, FilesAreListedRelativeAndSortedWithoutTheManifest) {
  StepDir d;
  fs::write_file_atomic(d.path + "/state.json", "{}");
  fs::write_file_atomic(d.path + "/manifest.json", "{}");
  EXPECT_EQ(io::checkpoint_files(d.path), (std::vector<std::string>{"a/w.bin", "state.json"}));
}

TEST(Manifest, AnIntactFileChecksOut) {
  StepDir d;
  io::FileCheck c = io::check_file(d.path, d.entry());
  EXPECT_EQ(c.kind, io::FileCheck::kIntact);
  EXPECT_EQ(io::describe(d.path, d.entry(), c), "");
}

TEST(Manifest, FlippedBytesAreAChecksumMismatch) {
  StepDir d;
  fs::write_file_atomic(d.path + "/a/w.bin", "123456780");  // same size, last byte changed
  io::FileCheck c = io::check_file(d.path, d.entry());
  EXPECT_EQ(c.kind, io::FileCheck::kChecksumDiffers);
  EXPECT_EQ(c.crc32c, util::crc32c("123456780"));
  EXPECT_NE(io::describe(d.path, d.entry(), c).find("/a/w.bin does not match its checksum (crc32c "), std::string::npos);
  EXPECT_NE(io::describe(d.path, d.entry(), c).find("written as e3069283): its bytes changed after the checkpoint was written"),
            std::string::npos);
}

TEST(Manifest, ATruncatedFileSaysHowMuchIsLeft) {
  StepDir d;
  fs::write_file_atomic(d.path + "/a/w.bin", "1234");
  io::FileCheck c = io::check_file(d.path, d.entry());
  EXPECT_EQ(c.kind, io::FileCheck::kSizeDiffers);
  EXPECT_EQ(io::describe(d.path, d.entry(), c), d.path + "/a/w.bin is truncated: 4 of 9 bytes");
}

TEST(Manifest, AMissingFileIsNamed) {
  StepDir d;
  stdfs::remove(d.path + "/a/w.bin");
  io::FileCheck c = io::check_file(d.path, d.entry());
  EXPECT_EQ(c.kind, io::FileCheck::kMissing);
  EXPECT_EQ(io::describe(d.path, d.entry(), c), d.path + "/a/w.bin is missing (or cannot be read)");
}
