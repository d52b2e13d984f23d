//===- LinearKernel.h - register-tiled kernels for y = x * W^T --*- C++ -*-===//
//
// What smlir-lower-sparse-linear needs: which smlir.linear ops have a
// micro-kernel, and the builder that emits one.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_LINEARKERNEL_H
#define SPARSE_MLIR_CODEGEN_LINEARKERNEL_H

#include "SparseMLIR/IR/SparseMLIROps.h"

#include <optional>

namespace mlir::smlir::codegen {

/// Below this many tokens, vectors along tokens would idle most lanes: the
/// decode kernel computes dot products along k instead.
constexpr int64_t kDecodeTokens = 4;
/// n:m decode with x permuted in registers (buildPermutedDecode) serves up
/// to this many tokens: a stored entry's value, coordinate and permute
/// index are then shared by every token (the token-block kernel idles 3/4
/// of its lanes at 4 tokens and ran slower than torch's dense GEMM).
constexpr int64_t kPermutedDecodeTokens = 8;

/// Where the stored entries of weight row `n` are.
struct WeightLayout {
  enum Kind { Dense, CSR, NOutOfM, BSR, ELL } kind;
  int64_t n = 0, m = 0; // n:m only
  // n:m whose rows share one pattern in groups of this many (the weight
  // argument's #smlir.nm<..., rows = r>): one slab read serves the group.
  int64_t sharedRows = 1;
  // BSR only: the dense blocks' rows and columns (BSRWeight.cpp).
  int64_t blockRows = 0, blockCols = 0;
  // ELL only: entries per row (ELLWeight.cpp).
  int64_t width = 0;
};

/// An smlir.linear with a micro-kernel: x[M, K] static f32, W[N, K].
struct SparseLinear {
  LinearOp op;
  Value x, weight;
  WeightLayout layout;
  int64_t M, K, N;
};

std::optional<SparseLinear> matchSparseLinear(LinearOp linear);

/// Whether `linear` may take bf16 dot products of pairs (vdpbf16ps) in
/// its token blocks with `lanes` lanes: x and W bf16, W 2:4 (rows sharing
/// patterns or not), 4 tokens or more, 16 lanes.
bool takesBF16Pairs(const SparseLinear &linear, int64_t lanes);

/// Emits the loops of `linear` (tiles of `rows` weight rows x `vectors`
/// vectors of `lanes` tokens) in an smlir.kernel; returns y[M, N].
/// `bf16Pairs` (where takesBF16Pairs holds): vdpbf16ps on pairs of x.
Value buildLinearKernel(OpBuilder &b, Location loc, const SparseLinear &linear,
                        int64_t rows, int64_t vectors, int64_t lanes,
                        bool bf16Pairs = false);

/// The n:m decode kernel for AVX-512 (m = 2n, M <= kPermutedDecodeTokens):
/// `rows` rows in lockstep, all M tokens at once, 16 entries per step with
/// x picked from a 32-float window by vpermi2ps; returns y[M, N].
Value buildPermutedDecode(OpBuilder &b, Location loc, const SparseLinear &linear,
                          int64_t rows);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_LINEARKERNEL_H
