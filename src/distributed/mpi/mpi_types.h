// Mapping between torch dtypes and MPI datatypes/ops, and MPI error checking.
// bfloat16 and float16 have no standard MPI type: they move as MPI_UINT16_T
// (bit copies) and are reduced in float32 by the backend, never by MPI.
#pragma once

#include <ATen/ATen.h>
#include <mpi.h>

#include <string>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::dist::mpi {

// Datatype that moves `dtype` elements bit-exactly. Throws for unsupported dtypes.
MPI_Datatype move_type(at::ScalarType dtype);
// Datatype MPI can reduce natively (float32/64, integers); throws for others.
MPI_Datatype reduce_type(at::ScalarType dtype);
// True for bfloat16/float16: reductions go through float32.
bool reduces_in_fp32(at::ScalarType dtype);
// MPI op for `op` (kAvg is a sum followed by a division by the group size).
MPI_Op mpi_op(ReduceOp op);
const char* op_name(ReduceOp op);

// Throws RuntimeError "<call> on <group> failed: <MPI error string>" unless rc == MPI_SUCCESS.
void check(int rc, const char* call, const std::string& group);

}  // namespace hpcrl::dist::mpi
