//===- WeightAccess.h - how a linear kernel reads its weight ----*- C++ -*-===//
//
// One strategy per weight layout (dense, CSR, n:m, n:m with rows sharing a
// pattern). The token-block and decode builders ask it whatever depends on
// the layout: the weight's buffers, where a row's entries are, how the
// entry loops step, and the inner loops of a row block.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_WEIGHTACCESS_H
#define SPARSE_MLIR_CODEGEN_WEIGHTACCESS_H

#include "LinearKernel.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::sparse_tensor {
class SparseTensorType;
} // namespace mlir::sparse_tensor

namespace mlir::smlir::codegen {

class MicrokernelBuilder;

class WeightAccess {
public:
  explicit WeightAccess(const SparseLinear &linear) : lin(linear) {}
  virtual ~WeightAccess();

  /// Sets the builder's values (and positions, coordinates) buffers.
  virtual void bindBuffers(MicrokernelBuilder &kb) const = 0;
  /// The layout's part of the kernel name ("dense", "csr", "2of4r4").
  virtual std::string name(bool decode) const = 0;
  /// Stored entries per row as the token loops read them (row chunks).
  virtual double entriesPerRow() const = 0;
  /// Bytes the token loops read per stored entry (row chunks): 8 where the
  /// entries are interleaved (value and slab offset in one i64).
  virtual double bytesPerEntry() const { return 8; }
  /// n:m groups per k-slice of a slab of MB tokens (0: k is not sliced).
  virtual int64_t groupsPerSlice(int64_t MB) const { return 0; }
  /// Slices of k, `groupsPerSlice` groups each.
  virtual int64_t slices(int64_t groupsPerSlice) const { return 1; }
  /// Where row `n` (a valid row) starts in the values and how long it is
  /// (dense: the row; n:m: counted in groups).
  virtual void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                         Value &length) const = 0;
  /// Whether rows differ in length (each then finishes alone).
  virtual bool raggedRows() const { return false; }

  /// The entry loops step over groups of this many entries (n:m), else 1.
  virtual int64_t entriesPerGroup() const { return 1; }
  /// The k of group `j`'s first column (to which its coordinates add).
  virtual Value groupK(MicrokernelBuilder &kb, Value j) const;
  /// The first entry of group `j` of a row.
  virtual Value groupEntry(MicrokernelBuilder &kb, Value j) const { return j; }
  /// A row's length as rowExtent counts it, in stored entries.
  virtual Value entryCount(MicrokernelBuilder &kb, Value length) const {
    return length;
  }
  /// The k of entry `j` of a row, whose stored coordinate is `crd`.
  virtual Value entryK(MicrokernelBuilder &kb, Value j, Value crd) const {
    return crd;
  }
  /// What to add to the coordinates of V entries j .. j + V of a row
  /// (null: nothing).
  virtual Value gatherOffsets(MicrokernelBuilder &kb, Value j) const {
    return {};
  }

  /// Re-lays the weight out once per call for many token blocks, if that
  /// pays for this layout.
  virtual void interleave(MicrokernelBuilder &kb) const {}
  /// acc[r][u] += row block nb's (rows n0 ..) tile over all of k.
  virtual void accumulateRowBlock(MicrokernelBuilder &kb, Value slab,
                                  Value n0, Value nb,
                                  SmallVectorImpl<Value> &acc) const = 0;
  /// The same over groups [g0, g1) only (k-sliced: n:m), rows at `starts`.
  virtual void accumulateGroups(MicrokernelBuilder &kb, Value slab, Value nb,
                                Value g0, Value g1, ArrayRef<Value> starts,
                                SmallVectorImpl<Value> &acc) const;
  /// sums[r] += y[m, n0 + r] (decode).
  virtual void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                          SmallVectorImpl<Value> &sums) const = 0;

protected:
  const SparseLinear &lin;
};

std::unique_ptr<WeightAccess> makeDenseWeight(const SparseLinear &linear);
std::unique_ptr<WeightAccess> makeCSRWeight(const SparseLinear &linear);
std::unique_ptr<WeightAccess> makeNMWeight(const SparseLinear &linear);
std::unique_ptr<WeightAccess> makeSharedRowsWeight(const SparseLinear &linear);
/// A bf16 2:4 weight (rows sharing patterns or not) read with dot products
/// of pairs (BF16Pairs.cpp).
std::unique_ptr<WeightAccess> makePairedNMWeight(const SparseLinear &linear);
std::unique_ptr<WeightAccess> makeBSRWeight(const SparseLinear &linear);
std::unique_ptr<WeightAccess> makeELLWeight(const SparseLinear &linear);
/// The width of a CSR weight argument stored as ELL (its smlir.encoding is
/// #smlir.ell<width = k>, k <= K), else none.
std::optional<int64_t> ellWidth(Value weight, int64_t K);
/// A 2-d f32 BSR tensor's layout (its blocks' sizes), else none.
std::optional<WeightLayout>
classifyBSRWeight(const sparse_tensor::SparseTensorType &type);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_WEIGHTACCESS_H
