// The units a model's parameters are gathered in when they are sharded over
// data parallelism (ZeRO-3, optim/zero3_units.h): each decoder layer is a unit,
// and one more ("outer") holds the embeddings, the final norm and the heads.
//
// The model calls before_forward(u) before it runs unit u and after_forward(u,
// output) when it is done with it. An implementation gathers the unit's full
// parameters for the first and may free them in the second; when the output
// needs gradients it must have them back before that unit's backward reads
// them. Between these calls the parameters of a sharded unit may hold no data.
//
// Code that reads or writes weights outside a forward walks the units the same
// way, one at a time (weight syncs, checkpoints, loading, the CPU engine's
// packing), or holds a WholeParameters scope: every unit stays gathered for
// its lifetime, and a `writes` scope hands what was written back to the
// shards before it lets go.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace hpcrl::model {

class DecoderModel;

class ParameterUnits {
 public:
  static constexpr int64_t kOuter = -1;  // embeddings, final norm, LM head, value head

  virtual ~ParameterUnits() = default;
  // Unit u's parameters hold their full values on return.
  virtual void before_forward(int64_t unit) = 0;
  // The model is done with unit u for this forward; `output` is what it
  // produced (a backward through it needs the unit again; undefined: no
  // backward follows, as when a checkpoint copies the unit).
  virtual void after_forward(int64_t unit, const at::Tensor& output) = 0;
  // Unit u's gathered values were changed (a checkpoint loaded into them):
  // the shards take them. Between before_forward(u) and after_forward(u, ·).
  virtual void write_back(int64_t unit) = 0;
  // Every unit gathered until the matching release_all(); nested scopes count.
  // `writes`: the caller changes parameter values, which release_all() keeps.
  virtual void hold_all(bool writes) = 0;
  virtual void release_all() = 0;
};

// The unit of an HF parameter name: N for "model.layers.N.…", else kOuter.
int64_t parameter_unit_of(const std::string& name);

// Every parameter of `model` holds its full values while this lives (a no-op
// for a model whose parameters are not sharded). Collective over the groups
// the parameters are sharded over: all their ranks open and close it together.
class WholeParameters {
 public:
  explicit WholeParameters(DecoderModel& model, bool writes = false);
  ~WholeParameters();
  WholeParameters(const WholeParameters&) = delete;
  WholeParameters& operator=(const WholeParameters&) = delete;

 private:
  ParameterUnits* units_;
};

}  // namespace hpcrl::model
