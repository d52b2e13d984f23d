//===- RowStorage.h - sparse tables read row by row -------------*- C++ -*-===//
//
// The tables smlir.gather_rows has a lowering for: shared by the pass that
// raises a lookup (it raises only these) and the one that lowers it.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_ROWSTORAGE_H
#define SPARSE_MLIR_CODEGEN_ROWSTORAGE_H

#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"

#include <optional>

namespace mlir::smlir::codegen {

/// Rows stored whole and in order: CSR (positions per row), or n:m (every
/// row D / m * n entries, coordinates in-group).
struct RowStorage {
  bool csr;
  int64_t n = 0, m = 0; // n:m only
};

inline std::optional<RowStorage> rowStorage(RankedTensorType type) {
  using namespace sparse_tensor;
  if (!getSparseTensorEncoding(type) || type.getRank() != 2)
    return std::nullopt;
  SparseTensorType stt(type);
  ArrayRef<LevelType> lvls = stt.getLvlTypes();
  if (stt.isIdentity() && lvls.size() == 2 && isDenseLT(lvls[0]) &&
      isCompressedLT(lvls[1]) && isUniqueLT(lvls[1]) && isOrderedLT(lvls[1]))
    return RowStorage{true};
  if (lvls.size() == 3 && isDenseLT(lvls[0]) && isDenseLT(lvls[1]) &&
      isNOutOfMLT(lvls[2]) && stt.hasStaticDimShape())
    return RowStorage{false, static_cast<int64_t>(getN(lvls[2])),
                      static_cast<int64_t>(getM(lvls[2]))};
  return std::nullopt;
}

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_ROWSTORAGE_H
