// model.safetensors.index.json of a sharded checkpoint (io/safetensors_index.h).
#include "fuzz_util.h"
#include "hpcrl/io/safetensors_index.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hpcrl::fuzz::write_scratch("model.safetensors.index.json", hpcrl::fuzz::as_text(data, size));
  try {
    (void)hpcrl::io::read_shard_index(path);
  } catch (const hpcrl::InputError&) {
  }
  return 0;
}
