// The tokenizer a saved model directory records (config/model_tokenizer.h): the
// byte tokenizer as a key of config.json, a file tokenizer as copies of its
// files, read back as what `--model DIR` and `init: {path: DIR}` load.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "hpcrl/config/model_tokenizer.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

using namespace hpcrl;
namespace stdfs = std::filesystem;

namespace {

// A fresh directory holding a model's config.json (two keys) and, under tok/, a tokenizer's files.
struct ModelDir {
  std::string path = testing::TempDir() + "/model-tok-" + std::to_string(::getpid());
  ModelDir() {
    stdfs::remove_all(path);
    fs::write_file_atomic(path + "/model/config.json", R"({"model_type": "llama", "vocab_size": 272})");
    fs::write_file_atomic(path + "/tok/tokenizer.json", R"({"model": {"type": "BPE"}})");
    fs::write_file_atomic(path + "/tok/tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})");
  }
  ~ModelDir() { stdfs::remove_all(path); }
  std::string model() const { return path + "/model"; }
};

std::string error_of(const std::string& dir) {
  try {
    config::recorded_model_tokenizer(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ModelTokenizer, ByteIsAKeyOfConfigJsonBesideTheArchitecture) {
  ModelDir d;
  config::record_model_tokenizer(d.model(), "byte");
  const auto j = nlohmann::json::parse(fs::read_file(d.model() + "/config.json"));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"model_type": "llama", "vocab_size": 272, "hpcrl_tokenizer": "byte"})"));
  EXPECT_FALSE(stdfs::exists(d.model() + "/tokenizer.json"));
  EXPECT_EQ(config::recorded_model_tokenizer(d.model()), "byte");
}

TEST(ModelTokenizer, TheOlderNameBuiltinRecordsTheByteTokenizerToo) {
  ModelDir d;
  config::record_model_tokenizer(d.model(), "builtin");
  EXPECT_EQ(config::recorded_model_tokenizer(d.model()), "byte");
}

TEST(ModelTokenizer, AFileTokenizerIsCopiedByteForByte) {
  ModelDir d;
  config::record_model_tokenizer(d.model(), d.path + "/tok");
  EXPECT_EQ(fs::read_file(d.model() + "/tokenizer.json"), R"({"model": {"type": "BPE"}})");
  EXPECT_EQ(fs::read_file(d.model() + "/tokenizer_config.json"), R"({"eos_token": "<|endoftext|>"})");
  EXPECT_EQ(fs::read_file(d.model() + "/config.json"), R"({"model_type": "llama", "vocab_size": 272})");
  EXPECT_EQ(config::recorded_model_tokenizer(d.model()), d.model());
}

TEST(ModelTokenizer, ATokenizerWithoutTokenizerConfigCopiesTokenizerJsonAlone) {
  ModelDir d;
  stdfs::remove(d.path + "/tok/tokenizer_config.json");
  config::record_model_tokenizer(d.model(), d.path + "/tok");
  EXPECT_TRUE(stdfs::exists(d.model() + "/tokenizer.json"));
  EXPECT_FALSE(stdfs::exists(d.model() + "/tokenizer_config.json"));
}

TEST(ModelTokenizer, ADirectoryThatRecordsNothingGivesEmpty) {
  ModelDir d;
  EXPECT_EQ(config::recorded_model_tokenizer(d.model()), "");
  EXPECT_EQ(config::recorded_model_tokenizer(d.path + "/absent"), "");
}

TEST(ModelTokenizer, AnUnknownRecordedNameIsAnErrorNamingConfigJson) {
  ModelDir d;
  fs::write_file_atomic(d.model() + "/config.json", R"({"model_type": "llama", "hpcrl_tokenizer": "bytes"})");
  EXPECT_EQ(error_of(d.model()),
            d.model() + "/config.json: \"hpcrl_tokenizer\" is \"bytes\", but the only tokenizer named there is "
                        "\"byte\" (the built-in byte tokenizer; a file tokenizer is a tokenizer.json beside "
                        "config.json): correct it, or remove the key and pass --tokenizer");
}

TEST(ModelTokenizer, AMissingSourceTokenizerIsAnErrorNamingIt) {
  ModelDir d;
  try {
    config::record_model_tokenizer(d.model(), d.path + "/gone");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(d.path + "/gone/tokenizer.json does not exist"), std::string::npos)
        << e.what();
  }
}
