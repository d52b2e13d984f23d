//===- MicrokernelBuilder.h - the loops of one linear kernel ----*- C++ -*-===//
//
// y = x * W^T for one SparseLinear (see LinearKernel.cpp for the loops).
// Its methods are spread by what they build: the token blocks
// (TokenBlocks.cpp), the loops over a row's entries (EntryLoops.cpp), the
// interleaved weights (Interleave.cpp), the output stages (OutputStage.cpp)
// and decode (Decode.cpp); what depends on the weight's layout is asked of
// its WeightAccess.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_MICROKERNELBUILDER_H
#define SPARSE_MLIR_CODEGEN_MICROKERNELBUILDER_H

#include "KernelBuilder.h"
#include "LinearKernel.h"
#include "WeightAccess.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::smlir::codegen {

/// Slab bytes an n:m row block reads per pass over k: a k-slice of the slab
/// this size stays in L1 while every row block of the thread reads it (each
/// stored entry reads its own slab row; from L2 they ran at half the FMA
/// rate).
constexpr int64_t kSlabSliceBytes = 16 * 1024;
/// The same for rows sharing a pattern (SharedRowsWeight): one slab load
/// serves R FMAs, so the slice may stay in L2 instead (with the row chunk's
/// weights, ~300 KB, in a 1 MB L2).
constexpr int64_t kSharedSlabSliceBytes = 256 * 1024;
/// Weight bytes one row chunk of a token-block kernel may read: every token
/// block of the chunk then finds it in L2. A weight past L2 (and L3), read
/// whole by each token block, streamed from memory once per block: a
/// 32000 x 512 2:4 LM head ran 1.3x slower than torch's dense GEMM.
constexpr int64_t kWeightChunkBytes = 512 * 1024;
/// A CSR weight's density is known at run time only: chunks are sized for
/// this one (denser weights then get chunks somewhat past the budget).
constexpr double kAssumedCSRDensity = 0.2;
/// From this many token blocks on, a CSR weight's row blocks are
/// interleaved once per call (O(nnz)) for the token loops that read them.
constexpr int64_t kInterleaveMinTokenBlocks = 4;

class MicrokernelBuilder : public KernelBuilder {
public:
  /// `bf16Pairs`: a bf16 2:4 weight's token blocks take bf16 dot products
  /// of pairs (BF16Pairs.cpp; the caller checks takesBF16Pairs).
  MicrokernelBuilder(OpBuilder &b, Location loc, const SparseLinear &linear,
                     int64_t rows, int64_t vectors, int64_t lanes,
                     bool bf16Pairs = false);

  /// Returns y[M, N] as a tensor.
  Value build();

  //===--- Token blocks (TokenBlocks.cpp) ---------------------------------===//
  void buildTokenBlocks();
  int64_t cacheChunks() const;
  void chunkRowBlocks(Value chunk, int64_t chunks, Value &first, Value &last);
  void pack(Value slabs, Value mb);
  void rowBlock(Value slab, Value m0, Value nb, Value column);
  void slicedRowBlocks(Value slab, Value partial, Value mb, Value m0,
                       Value first, Value last);

  //===--- Loops over a row's stored entries (EntryLoops.cpp) -------------===//
  /// Visits stored entry `p` of a row, whose k is kBase + its stored
  /// coordinate (n:m coordinates are in-group), with the row's accumulators.
  using EntryVisitor =
      llvm::function_ref<void(Value kBase, Value p, MutableArrayRef<Value> acc)>;
  void accumulateEntry(Value slab, Value kBase, Value p,
                       MutableArrayRef<Value> acc);
  void entryLoop(Value lo, Value hi, ArrayRef<Value> starts, int64_t perRow,
                 SmallVectorImpl<Value> &acc, EntryVisitor visit);
  void sharedEntryLoop(Value lo, Value hi, ArrayRef<Value> starts,
                       SmallVectorImpl<Value> &acc, Value slab);
  void accumulateSlabRow(Value slab, Value row, MutableArrayRef<Value> acc,
                         llvm::function_ref<Value(int64_t)> weight);
  void sparseRows(Value n0, int64_t perRow, SmallVectorImpl<Value> &acc,
                  EntryVisitor visit);
  void rowExtents(Value n0, SmallVectorImpl<Value> &starts,
                  SmallVectorImpl<Value> &lengths);
  void denseLoop(Value slab, ArrayRef<Value> rows, SmallVectorImpl<Value> &acc);

  //===--- Interleaved weights (Interleave.cpp) ---------------------------===//
  void interleaveRows();
  void interleaveGroups();
  Value packEntry(Value offset, Value value);
  void interleaveBlocks(int64_t perRow,
                        llvm::function_ref<Value(Value j, Value start)> entry);
  void storeBlockEntry(Value entry, Value nb, int64_t r, Value at);
  void interleavedRows(Value nb, Value slab, SmallVectorImpl<Value> &acc);
  void interleavedEntries(Value lo, Value hi, Value slab,
                          SmallVectorImpl<Value> &acc);
  void packedEntryLoop(
      Value lo, Value hi, SmallVectorImpl<Value> &acc,
      llvm::function_ref<void(Value bits, Value offset,
                              MutableArrayRef<Value> acc)>
          entry);

  //===--- bf16 2:4 with dot products of pairs (BF16Pairs.cpp) ------------===//
  /// f32 values per token block's slab: the f32 slab (K x MB), then with
  /// bf16Pairs the pair slab (6 pairs per group of 4, MB 32-bit words each).
  int64_t slabSize() const;
  void packPairs(Value slabs, Value mb);
  void interleavePairs();
  Value pairOffset(Value group, Value c0, Value c1);
  Value pairWord(Value p);
  void accumulatePair(Value slab, Value kBase, Value p,
                      MutableArrayRef<Value> acc);
  Value broadcastPair(Value word);
  Value slabPairs(Value slab, Value offset, int64_t u);
  void dotPairs(Value slab, Value offset, Value word,
                MutableArrayRef<Value> acc);
  void sharedPairLoop(Value lo, Value hi, ArrayRef<Value> starts,
                      SmallVectorImpl<Value> &acc, Value slab);
  void pairedEntries(Value lo, Value hi, Value slab,
                     SmallVectorImpl<Value> &acc);

  //===--- Output stages (OutputStage.cpp) --------------------------------===//
  int64_t stageRowBlocks() const;
  int64_t stageWidth() const { return stageRowBlocks() * R; }
  void stagedRowBlocks(Value first, Value last, Value m0, Value flush,
                       llvm::function_ref<void(Value nb, Value column)> visit);
  void flushStage(Value m0, Value n0, Value nEnd);
  void store(ArrayRef<Value> acc, Value column);
  /// y's buffer: a new one, or (accumulate-into) the `into` operand's.
  void bindOutput();
  /// y[m, n] = v, or y[m, columns[n]] += v when accumulating into y.
  void storeY(Value v, Value m, Value n);
  /// Vector `v` of columns n .. n + V - 1 (the first `mask` lanes, if
  /// given) to y's row m, as storeY does each lane (not into `columns`).
  void storeYVector(Value v, Value m, Value n, Value mask);

  //===--- Decode (Decode.cpp) --------------------------------------------===//
  void buildDecode();
  void widenX();
  void parallelRowBlocks(llvm::function_ref<void(Value n0)> rowBlock);
  void decodeRows(Value m, Value n0);
  void decodeGathered(Value m, Value n0, SmallVectorImpl<Value> &sums);
  Value gatheredFma(Value m, Value start, Value j, Value acc);

  //===--- n:m decode, x permuted in registers (PermutedDecode.cpp) -------===//
  void buildPermutedDecodeLoops();
  void permutedRows(Value n0);
  Value permuteIndex(Value p);

  Value zeroVector();
  /// `v` (a loaded x or weight value, scalar or vector) as f32: half
  /// precision storage (bf16, f16) is extended where it is loaded, the
  /// kernel accumulates in f32. f32 values are returned as they are.
  Value widen(Value v);

  const SparseLinear &lin;
  std::unique_ptr<WeightAccess> access;
  int64_t R, V, U, MB;
  int64_t sliceGroups, slices; // n:m k-slices (1 slice: CSR, dense, small K)
  Type f32;
  Type storage; // x's and the weight's element type: f32, bf16 or f16
  VectorType vecType;
  Value x, y, positions, coordinates, values;
  // Accumulate-into (smlir.linear's `into`): y += x W^T, W's row n going
  // to y's column yColumns[n] where yColumns (an i32 / i64 memref) is set.
  bool accumulate = false;
  Value yColumns;
  // A CSR weight interleaved by row blocks (interleaveRows), else null.
  Value blockStarts, packedEntries;
  // The output stages (one per parallel iteration) and this iteration's.
  Value stages, stageBase;
  bool stagesMayBePartial = true;
  // n:m decode with x permuted in registers (buildPermutedDecode).
  bool permutedDecode = false;
  // bf16 2:4 token blocks with dot products of pairs (BF16Pairs.cpp).
  bool bf16Pairs = false;

private:
  /// "linear_csr_1024x768x3072": what and which shape (M x K x N).
  std::string kernelName() const;
};

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_MICROKERNELBUILDER_H
