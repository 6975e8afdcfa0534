// torch dtype -> MPI datatype tables and the MPI return-code check used by the
// MPI backend. Only standard MPI-3 types: clusters run Cray MPICH as well as OpenMPI.
#include "distributed/mpi/mpi_types.h"

#include "hpcrl/util/check.h"

namespace hpcrl::dist::mpi {

MPI_Datatype move_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kBool: return MPI_UINT8_T;
    case at::kBFloat16:
    case at::kHalf: return MPI_UINT16_T;
    default: break;
  }
  HPCRL_CHECK(false, "dtype " << dtype << " is not supported by the MPI communicator; use float32, float64, "
                              "bfloat16, float16, int8/16/32/64 or uint8");
}

MPI_Datatype reduce_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    default: break;
  }
  HPCRL_CHECK(false, "dtype " << dtype << " cannot be reduced by the MPI communicator; convert to a "
                              "floating-point or integer dtype first");
}

bool reduces_in_fp32(at::ScalarType dtype) { return dtype == at::kBFloat16 || dtype == at::kHalf; }

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

void check(int rc, const char* call, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(std::string(call) + " on group '" + group + "' failed: " + std::string(text, len));
}

}  // namespace hpcrl::dist::mpi
