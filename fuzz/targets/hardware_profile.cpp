// A hardware profile for `hpcrl plan --estimate --hardware FILE`
// (cost/hardware_profile.h): peak rates, memory, links, efficiencies.
#include "fuzz_util.h"
#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)hpcrl::cost::parse_profile(std::string(hpcrl::fuzz::as_text(data, size)), "fuzz-profile.yaml");
  } catch (const hpcrl::InputError&) {
  }
  return 0;
}
