// The two small JSON files a run directory keeps about its progress, read
// back on --resume and checked before anything acts on them (a value that was
// edited or damaged is an error naming the file, never a wrong resume):
//   checkpoints/<NN>-<stage>/step-NNNNNN/state.json
//     {"step": 40, "cursor": {epoch, index, seed, size}, "layout": {role: {...}},
//      "rng": [bytes of torch's CPU generator], ...stage-specific keys}
//   checkpoints/<NN>-<stage>/complete.json
//     {"steps": 40, "eval_accuracy": 0.52, "eval_loss": 1.3, "seconds": 88.1}
// Torch-free (the RNG bytes are only checked to be bytes here; torch checks
// that they form a state when they are set), so both parsers are fuzzed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace hpcrl::io {

// state.json as an object with "step" a non-negative integer, "layout" (when
// present) an object, "cursor" (when present) a valid data cursor and "rng"
// (when present) a list of bytes. InputError naming `where` otherwise.
nlohmann::json parse_checkpoint_state(std::string_view text, const std::string& where);

struct StageRecord {
  int64_t steps = 0;
  double eval_accuracy = -1;  // -1: not measured
};
// complete.json; InputError naming `where` unless "steps" is a non-negative integer.
StageRecord parse_stage_record(std::string_view text, const std::string& where);

}  // namespace hpcrl::io
