// The small JSON files of a run directory read back on --resume: a step's
// manifest.json (io/checkpoint_manifest.h), its state.json and a stage's
// complete.json (io/checkpoint_state.h) — the same bytes as each.
#include "fuzz_util.h"
#include "hpcrl/io/checkpoint_manifest.h"
#include "hpcrl/io/checkpoint_state.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = hpcrl::fuzz::as_text(data, size);
  try {
    auto m = hpcrl::io::parse_manifest(text, "manifest.json");
    (void)hpcrl::io::format_manifest(m);
  } catch (const hpcrl::InputError&) {
  }
  try {
    (void)hpcrl::io::parse_checkpoint_state(text, "state.json");
  } catch (const hpcrl::InputError&) {
  }
  try {
    (void)hpcrl::io::parse_stage_record(text, "complete.json");
  } catch (const hpcrl::InputError&) {
  }
  return 0;
}
