// Inputs that passed every check and then crashed the run, or ran to nonsense: each is
// refused before the run with the place and the fix (docs/reliability.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 2, batch: 4}}]'" +
                         " --set run.eval_before_train=false --set run.eval_sampling.prompts=4";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A safetensors file opened for editing in place: its JSON header and where tensor `name`'s
// entry starts in it (npos when the header does not name it).
struct SafetensorsEdit {
  std::fstream file;
  std::string header;
  size_t entry = std::string::npos;
  SafetensorsEdit(const std::string& path, const std::string& name)
      : file(path, std::ios::in | std::ios::out | std::ios::binary) {
    uint64_t n = 0;
    file.read(reinterpret_cast<char*>(&n), 8);
    header.assign(n, '\0');
    file.read(header.data(), static_cast<std::streamsize>(n));
    entry = header.find("\"" + name + "\"");
  }
};

// Rewrites the dtype of tensor `name` in a safetensors file's JSON header, e.g. "F32" -> "I32"
// (same width, so the header keeps its length and the bytes stay where they are).
void relabel_dtype(const std::string& path, const std::string& name, const std::string& from, const std::string& to) {
  SafetensorsEdit st(path, name);
  ASSERT_NE(st.entry, std::string::npos) << name;
  const size_t dtype = st.header.find("\"" + from + "\"", st.entry);
  ASSERT_NE(dtype, std::string::npos);
  st.header.replace(dtype + 1, from.size(), to);
  st.file.seekp(8);
  st.file.write(st.header.data(), static_cast<std::streamsize>(st.header.size()));
}

// Writes a float NaN over the first element of tensor `name` in a safetensors file.
void poison_first_element(const std::string& path, const std::string& name) {
  SafetensorsEdit st(path, name);
  ASSERT_NE(st.entry, std::string::npos) << name;
  const size_t open = st.header.find('[', st.header.find("data_offsets", st.entry));
  const uint64_t begin = std::stoull(st.header.substr(open + 1));
  const uint32_t nan_bits = 0x7fc00000;
  st.file.seekp(static_cast<std::streamoff>(8 + st.header.size() + begin));
  st.file.write(reinterpret_cast<const char*>(&nan_bits), 4);
}
}  // namespace

// Before, every non-finite gradient said "lower the learning rate", NaN weights included.
TEST(InputHolesE2E, NanInitWeightsAreNamedNotBlamedOnTheLearningRate) {
  const std::string dir = scratch_dir("nan-weights");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  const std::string model = dir + "/model";
  fs::copy(dir + "/run/checkpoints/00-sft/step-000002/policy", model);
  fs::remove(model + "/manifest.json");
  poison_first_element(model + "/model.safetensors", "model.embed_tokens.weight");
  Proc p = run_hpcrl("run " + kSft + " --set 'models.policy.init={path: " + model + "}' --out " + dir + "/run2");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(has(p.output, "the weights of role 'policy' already hold non-finite values (first: "
                            "model.embed_tokens.weight)")) << p.output;
  EXPECT_FALSE(has(p.output, "lower the learning rate")) << p.output;
}

// tiny-2l has 272 rows (258 byte ids, padded to 16); Qwen3's tokenizer has 151,669 ids.
TEST(InputHolesE2E, ATokenizerWithMoreIdsThanTheModelIsRefusedByValidate) {
  Proc p = run_hpcrl("validate " + kSft + " --set models.policy.tokenizer=data/tokenizers/qwen3");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "models.policy: its tokenizer (data/tokenizers/qwen3) has ")) << p.output;
  EXPECT_TRUE(has(p.output, "ids but the model's vocabulary has 272 rows (vocab_size)")) << p.output;
}

TEST(InputHolesE2E, IntegerTypedInitWeightsAreRefusedNamingTheTensor) {
  const std::string dir = scratch_dir("int-weights");
  ASSERT_EQ(run_hpcrl("run " + kSft + " --out " + dir + "/run").exit_code, 0);
  const std::string model = dir + "/model";
  fs::copy(dir + "/run/checkpoints/00-sft/step-000002/policy", model);
  fs::remove(model + "/manifest.json");
  relabel_dtype(model + "/model.safetensors", "model.embed_tokens.weight", "F32", "I32");
  Proc p = run_hpcrl("validate " + kSft + " --set 'models.policy.init={path: " + model + "}'");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "tensor 'model.embed_tokens.weight' is stored as I32, not a floating type")) << p.output;
}

TEST(InputHolesE2E, ARunThePlanCannotFitIsRefusedBeforeAnythingIsAllocated) {
  const std::string dir = scratch_dir("no-fit");
  // 10^8 rollout slots: the plan's KV cache alone is ~2·10^5 GiB (10^8 sequences x 2048 tokens x 2 KiB).
  Proc p = run_hpcrl("run " + kConfig + " --set models.policy.rollout.max_batch=100000000 --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "this run needs about")) << p.output;
  EXPECT_TRUE(has(p.output, "the largest transient part is policy.rollout's")) << p.output;
  EXPECT_TRUE(has(p.output, "run.check_memory: false skips this check")) << p.output;
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

// Whether process `pid` has a handler for `sig` (the SigCgt mask of /proc/PID/status).
bool catches(int pid, int sig) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  return false;
}

// Before, the handlers were installed once the inputs had loaded: a SIGUSR1 in that window
// killed the job (exit 138), so a batch script did not requeue it.
TEST(InputHolesE2E, AStopSignalWhileTheJobStartsExits75AndTheResumeRunsIt) {
  const std::string dir = scratch_dir("stop-at-start");
  // 2,000,000 synthetic rows take seconds to generate: the job is still starting when the
  // signal comes, sent as soon as the process has its handler.
  const std::string args = "run " + kSft + " --set data.arith.synthetic.train=2000000 --out " + dir + "/run";
  const int pid = spawn_hpcrl(args, 1, dir + "/log");
  for (int i = 0; i < 3000 && !catches(pid, SIGUSR1); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(catches(pid, SIGUSR1)) << read_text(dir + "/log");
  ASSERT_EQ(::kill(pid, SIGUSR1), 0);
  const int rc = wait_exit(pid);
  const std::string log = read_text(dir + "/log");
  EXPECT_EQ(rc, 75) << log;
  EXPECT_TRUE(has(log, "SIGUSR1 arrived while the job was starting, before its first step")) << log;
  EXPECT_TRUE(read_text(dir + "/run/metrics.jsonl").empty()) << "no step ran";
  // The requeued job (--resume) runs the stage from its beginning: 2 steps.
  Proc resumed = run_hpcrl(args + " --resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(lines_with(read_metrics(dir + "/run/metrics.jsonl"), "sft", "loss").size(), 2u);
}

// Before, the message was printed as a C string and ended at the NUL.
TEST(InputHolesE2E, ANulByteInAKeyIsShownAndDoesNotCutTheMessage) {
  const std::string dir = scratch_dir("nul-key");
  std::string yaml = read_text(kConfig);
  // YAML's "\0" escape puts a NUL byte in the key (a raw NUL makes the file binary, refused as such).
  yaml.replace(yaml.find("seed: 3"), 7, R"("se\0ed": 3)");
  std::ofstream(dir + "/p.yaml", std::ios::binary) << yaml;
  Proc p = run_hpcrl("validate " + dir + "/p.yaml");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "unknown key 'se\\0ed'; did you mean 'seed'?")) << p.output;
  EXPECT_TRUE(has(p.output, "1 error in " + dir + "/p.yaml")) << p.output;
}

// Before, 10^8 synthetic rows (the documented maximum) under a memory limit ended in a bare
// std::bad_alloc. The plan does not count the data, so the allocation itself fails: the
// message says what was being built.
TEST(InputHolesE2E, AnOutOfMemoryWhileTheDataLoadsSaysWhatWasBeingBuilt) {
  const std::string dir = scratch_dir("oom-data");
  Proc p = run_shell("ulimit -v 3000000; " + std::string(HPCRL_BINARY) + " run " + kSft +
                     " --set data.arith.synthetic.train=100000000 --out " + dir + "/run 2>&1");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(has(p.output, "ran out of memory while reading the data (the data: section) on rank 0 (std::bad_alloc)"))
      << p.output;
  EXPECT_FALSE(fs::exists(dir + "/run")) << "nothing is created before the inputs have loaded";
}
