// A pipeline file: YAML read with bounded aliases, schema, references,
// layouts for 8 ranks (config/loader.h), then rendered back as
// config.resolved.yaml and as validate's summary.
#include "fuzz_util.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hpcrl::config::ValidateOptions opt;
  opt.world = 8;
  auto res = hpcrl::config::check_pipeline_text(std::string(hpcrl::fuzz::as_text(data, size)), "fuzz.yaml", {}, opt);
  for (const auto& e : res.diagnostics.errors) (void)e.str();
  if (res.ok()) {
    (void)hpcrl::config::to_yaml(res.config);
    (void)hpcrl::config::summarize(res.config, opt);
  }
  return 0;
}
