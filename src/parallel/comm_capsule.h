// Keeps a communicator inside an autograd context. saved_data only stores
// IValues, and a backward must use the very group its forward used, so the
// shared_ptr travels in a capsule (shared by the tensor- and sequence-parallel ops).
#pragma once

#include <ATen/core/ivalue.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::detail {

struct CommHolder : torch::CustomClassHolder {
  explicit CommHolder(dist::CommPtr c) : comm(std::move(c)) {}
  dist::CommPtr comm;
};

inline at::IValue pack_comm(const dist::CommPtr& comm) {
  return at::IValue::make_capsule(c10::make_intrusive<CommHolder>(comm));
}

inline dist::CommPtr unpack_comm(const at::IValue& v) {
  return c10::static_intrusive_pointer_cast<CommHolder>(v.toCapsule())->comm;
}

inline bool active(const dist::CommPtr& comm) { return comm && comm->size() > 1; }

}  // namespace hpcrl::parallel::detail
