//===- SampledMatmul.h - the CPU micro-kernel of smlir.sampled_matmul -*- C++ -*-===//
//
// What smlir-lower-sampled-matmul needs: which ops have a micro-kernel (and
// why not, for the others' diagnostic) and the builder that emits one.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_SAMPLEDMATMUL_H
#define SPARSE_MLIR_CODEGEN_SAMPLEDMATMUL_H

#include "SparseMLIR/IR/SparseMLIROps.h"

#include <string>

namespace mlir::smlir::codegen {

/// An smlir.sampled_matmul with a micro-kernel: an f32 CSR or n:m pattern
/// [M, N] with static M and N (T, the contraction, may be dynamic).
struct SampledMatmul {
  SampledMatmulOp op;
  enum Kind { CSR, NOutOfM } kind;
  int64_t n = 0, m = 0; // n:m only
  // n:m whose rows share one pattern in groups of this many (the pattern
  // argument's #smlir.nm<..., rows = r>): each B' load serves the group.
  int64_t sharedRows = 1;
  int64_t M = 0, N = 0;
};

/// The op's micro-kernel form, or failure with `why` set.
FailureOr<SampledMatmul> matchSampledMatmul(SampledMatmulOp op,
                                            std::string &why);

/// The buffers of a built kernel's result.
struct SampledMatmulBuffers {
  Value values;                  // memref<?xf32>, new
  SmallVector<Value> levels;     // the pattern's positions / coordinates
};

/// Emits the loops of `sm` in an smlir.kernel (before `sm.op`): `entries`
/// stored entries per iteration, vectors of `lanes` f32, T in tiles of
/// `tileTokens` (a multiple of 8 and of `lanes`).
SampledMatmulBuffers buildSampledMatmulKernel(OpBuilder &b,
                                              const SampledMatmul &sm,
                                              int64_t lanes, int64_t entries,
                                              int64_t tileTokens);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_SAMPLEDMATMUL_H
