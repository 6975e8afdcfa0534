// Corrupt safetensors files, made byte by byte here: each must be an InputError
// naming the file (and the tensor, where there is one) and what is wrong, with
// sizes where sizes matter. These run under AddressSanitizer too (see CMakeLists).
#include <gtest/gtest.h>

#include "hpcrl/io/safetensors.h"
#include "hpcrl/io/safetensors_writer.h"
#include "st_helpers.h"

using namespace hpcrl;
using namespace hpcrl::io;
using st_test::expect_input_error;
using st_test::raw_safetensors;

namespace {

// Writes `bytes` as <test>/bad.safetensors and expects opening it to fail with
// the path and every fragment in the message.
void expect_corrupt(const std::vector<uint8_t>& bytes, std::vector<std::string> fragments) {
  st_test::ScratchDir dir;
  std::string path = dir.file("bad.safetensors");
  st_test::write_bytes(path, bytes);
  fragments.insert(fragments.begin(), path + ": ");
  expect_input_error([&] { SafetensorsFile f(path); }, fragments);
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" +
         std::to_string(b) + ", " + std::to_string(e) + "]}";
}

}  // namespace

TEST(SafetensorsCorrupt, EmptyAndShorterThanEightBytes) {
  expect_corrupt({}, {"file is 0 bytes, too short for a safetensors file"});
  expect_corrupt({1, 2, 3, 4, 5},
                 {"file is 5 bytes, too short for a safetensors file", "it must start with an 8-byte header length"});
}

TEST(SafetensorsCorrupt, HeaderLengthLargerThanTheFile) {
  std::string h = "{}";
  expect_corrupt(
      raw_safetensors(h, 0, 1000),
      {"header length 1000 runs past the end of the file: expected at least 1008 bytes, got 10", "truncated"});
  expect_corrupt(raw_safetensors(h, 0, int64_t(1) << 40), {"header length 1099511627776 is larger than the "
                                                           "100000000-byte limit"});
}

TEST(SafetensorsCorrupt, TruncatedFileReportsExpectedAndActualSize) {
  st_test::ScratchDir dir;
  std::string path = dir.file("cut.safetensors");
  std::vector<float> a(16, 1.f), b(10, 2.f);
  write_safetensors(
      path, {tensor_from_bytes("a", Dtype::F32, {16}, a.data()), tensor_from_bytes("b", Dtype::F32, {10}, b.data())});
  std::vector<uint8_t> bytes = st_test::read_bytes(path);
  size_t full = bytes.size();
  bytes.resize(full - 10);
  // Tensor b (sorted after a by name) ends at the end of the file.
  expect_corrupt(bytes,
                 {"tensor 'b': data_offsets [64, 104] end past the data section (94 bytes)",
                  "expected a file of at least " + std::to_string(full) + " bytes, got " + std::to_string(full - 10),
                  "truncated"});
}

TEST(SafetensorsCorrupt, BadJsonAndNonObjectHeader) {
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": ", 0), {"header is not valid JSON (", "parse error"});
  expect_corrupt(raw_safetensors("[1, 2]", 0), {"header must be a JSON object of tensor entries, got array"});
  expect_corrupt(raw_safetensors("\"x\"    ", 0), {"header must be a JSON object of tensor entries, got string"});
  expect_corrupt(raw_safetensors("{\"w\": 3}", 0), {"tensor 'w': entry must be an object", "got number"});
  expect_corrupt(raw_safetensors("{\"w\": {\"bad\xff\": 1}}", 0), {"header is not valid JSON"});
  std::string deep = "{\"w\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
  expect_corrupt(raw_safetensors(deep, 0), {"header JSON nests deeper than 16 levels"});
}

TEST(SafetensorsCorrupt, UnknownDtypeSuggestsTheClosest) {
  expect_corrupt(raw_safetensors("{" + entry("w", "F33", "[2]", 0, 8) + "}", 8),
                 {"tensor 'w': unknown dtype \"F33\"", "supported: BOOL, U8", "did you mean F32?"});
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": 4, \"shape\": [], \"data_offsets\": [0, 4]}}", 4),
                 {"tensor 'w': dtype must be a string"});
}

TEST(SafetensorsCorrupt, ShapeTimesDtypeSizeMustEqualTheOffsets) {
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "[2, 3]", 0, 20) + "}", 20),
                 {"tensor 'w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] span 20"});
  expect_corrupt(raw_safetensors("{" + entry("s", "BF16", "[]", 0, 4) + "}", 4),
                 {"tensor 's': shape [] of BF16 needs 2 bytes but data_offsets [0, 4] span 4"});
  expect_corrupt(raw_safetensors("{" + entry("h", "U8", "[4294967296, 4294967296, 4]", 0, 0) + "}", 0),
                 {"tensor 'h': shape [4294967296, 4294967296, 4] is too large"});
}

TEST(SafetensorsCorrupt, OffsetsOutOfRangeOrReversed) {
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "[6]", 0, 24) + "}", 16),
                 {"tensor 'w': data_offsets [0, 24] end past the data section (16 bytes)"});
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "[1]", 8, 4) + "}", 16),
                 {"tensor 'w': data_offsets [8, 4] begin after end"});
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4),
                 {"tensor 'w': data_offsets must be [begin, end] with non-negative integers, got [-4,0]"});
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4),
                 {"tensor 'w': data_offsets must be [begin, end]"});
}

TEST(SafetensorsCorrupt, OverlappingRangesNameBothTensors) {
  expect_corrupt(
      raw_safetensors("{" + entry("b", "F32", "[4]", 8, 24) + ", " + entry("a", "F32", "[4]", 0, 16) + "}", 24),
      {"tensors 'a' data_offsets [0, 16] and 'b' [8, 24] overlap"});
  // A range wholly inside an earlier long one also overlaps.
  expect_corrupt(raw_safetensors("{" + entry("long", "U8", "[32]", 0, 32) + ", " + entry("x", "U8", "[4]", 20, 24) +
                                     ", " + entry("y", "U8", "[4]", 8, 12) + "}",
                                 32),
                 {"tensors 'long' data_offsets [0, 32] and 'y' [8, 12] overlap"});
  // Empty tensors share offsets with neighbours without overlapping them.
  st_test::ScratchDir dir;
  st_test::write_bytes(dir.file("ok.safetensors"),
                       raw_safetensors("{" + entry("a", "U8", "[4]", 0, 4) + ", " + entry("e", "U8", "[0]", 2, 2) +
                                           ", " + entry("b", "U8", "[4]", 4, 8) + "}",
                                       8));
  SafetensorsFile ok(dir.file("ok.safetensors"));
  EXPECT_EQ(ok.tensors().size(), 3u);
}

TEST(SafetensorsCorrupt, NegativeOrNonIntegerDims) {
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "[2, -1]", 0, 8) + "}", 8),
                 {"tensor 'w': shape[1] is -1: dimensions must be non-negative"});
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "[1.5]", 0, 8) + "}", 8),
                 {"tensor 'w': shape[0] must be a non-negative integer, got 1.5"});
  expect_corrupt(raw_safetensors("{" + entry("w", "F32", "{}", 0, 8) + "}", 8),
                 {"tensor 'w': shape must be an array of non-negative integers, got {}"});
}

TEST(SafetensorsCorrupt, MissingKeysAreNamed) {
  expect_corrupt(raw_safetensors("{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                 {"tensor 'w': missing key \"dtype\""});
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4),
                 {"tensor 'w': missing key \"shape\""});
  expect_corrupt(raw_safetensors("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4),
                 {"tensor 'w': missing key \"data_offsets\"", "each entry needs dtype, shape, data_offsets"});
}

TEST(SafetensorsCorrupt, DuplicateNamesAndBadMetadata) {
  expect_corrupt(raw_safetensors("{" + entry("w", "U8", "[1]", 0, 1) + ", " + entry("w", "U8", "[1]", 1, 2) + "}", 2),
                 {"header names tensor 'w' twice"});
  expect_corrupt(raw_safetensors("{\"__metadata__\": {\"format\": 1}}", 0),
                 {"__metadata__ key 'format' must be a string, got 1"});
  expect_corrupt(raw_safetensors("{\"__metadata__\": []}", 0),
                 {"__metadata__ must be an object of string values, got array"});
}

TEST(SafetensorsCorrupt, MissingFileAndDirectory) {
  st_test::ScratchDir dir;
  expect_input_error([&] { SafetensorsFile f(dir.file("nope.safetensors")); },
                     {"safetensors file not found: " + dir.file("nope.safetensors")});
  expect_input_error([&] { SafetensorsFile f(dir.path().string()); }, {"is not a regular file"});
}
