// A safetensors file's first bytes: header length, JSON header, offsets, as a
// download or a crashed save may leave them (io/safetensors.h).
#include "fuzz_util.h"
#include "hpcrl/io/safetensors.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    hpcrl::io::SafetensorsHeader h = hpcrl::io::parse_safetensors(data, size, "fuzz.safetensors");
    for (const auto& t : h.tensors) (void)t.numel();
  } catch (const hpcrl::InputError&) {
  }
  return 0;
}
