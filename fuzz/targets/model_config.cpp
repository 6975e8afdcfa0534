// An HF config.json (init.path models, checkpoints): architecture, RoPE
// scaling, MoE fields (config/model_arch.h), then what hpcrl derives from it.
#include "fuzz_util.h"
#include "hpcrl/config/model_arch.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hpcrl::fuzz::write_scratch("config.json", hpcrl::fuzz::as_text(data, size));
  try {
    hpcrl::ModelArch arch = hpcrl::load_hf_config(path);
    (void)arch.dims(4096);
    (void)arch.num_parameters();
    (void)hpcrl::to_hf_config_json(arch);
  } catch (const hpcrl::InputError&) {
  }
  return 0;
}
