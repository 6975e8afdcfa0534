// Turns a Mesh's rank groups into communicators (see mesh_comms.h).
#include "hpcrl/distributed/mesh_comms.h"

#include "hpcrl/distributed/bootstrap.h"

namespace hpcrl::dist {
namespace {

// MeshComms fields in GroupKind order.
constexpr CommPtr MeshComms::*kSlots[] = {&MeshComms::tp,    &MeshComms::sp,    &MeshComms::dp, &MeshComms::pp,
                                          &MeshComms::dp_sp, &MeshComms::tp_pp, &MeshComms::ep, &MeshComms::edp};
static_assert(std::size(kSlots) == std::size(kAllGroupKinds));

}  // namespace

const CommPtr& MeshComms::get(GroupKind kind) const { return this->*kSlots[static_cast<int>(kind)]; }

MeshComms create_mesh_comms(const Mesh& mesh) {
  const std::string prefix = (mesh.role().empty() ? std::string("mesh") : mesh.role()) + "/";
  MeshComms c;
  for (GroupKind kind : kAllGroupKinds)
    c.*kSlots[static_cast<int>(kind)] = new_groups(mesh.groups(kind), prefix + group_name(kind));
  return c;
}

}  // namespace hpcrl::dist
