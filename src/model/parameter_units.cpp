// Unit names and the whole-parameters scope (parameter_units.h).
#include "hpcrl/model/parameter_units.h"

#include <cstdlib>

#include "hpcrl/model/decoder_model.h"

namespace hpcrl::model {

int64_t parameter_unit_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return ParameterUnits::kOuter;
  const char* digits = name.c_str() + prefix.size();
  char* end = nullptr;
  const long long layer = std::strtoll(digits, &end, 10);
  return end != digits && *end == '.' ? int64_t(layer) : ParameterUnits::kOuter;
}

WholeParameters::WholeParameters(DecoderModel& model, bool writes) : units_(model.parameter_units()) {
  if (units_) units_->hold_all(writes);
}

WholeParameters::~WholeParameters() {
  if (units_) units_->release_all();
}

}  // namespace hpcrl::model
