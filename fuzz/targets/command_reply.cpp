// One line a `command` reward program prints in answer to a sample
// (reward/command_reply.h): {"score": x} with an optional "index".
#include "fuzz_util.h"
#include "reward/command_reply.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(hpcrl::fuzz::as_text(data, size));
  double score = 0;
  (void)hpcrl::reward::reply_problem(line, 3, score);
  (void)hpcrl::reward::truncated(line);
  return 0;
}
