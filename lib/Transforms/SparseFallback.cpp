//===- SparseFallback.cpp - dense reads where no sparse lowering exists ---===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "llvm/ADT/SetVector.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_SPARSEFALLBACK
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// An n:m tensor with one group per row (K == m): upstream's
/// sparse-reinterpret-map folds its group level (`d1 floordiv m` of a size-m
/// dimension) to 0 and fails ("invalid indexing maps are
/// non-invertible"); only our f32 micro-kernels read it.
static bool isSingleGroupNMForUpstream(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !sparse_tensor::getSparseTensorEncoding(type) ||
      type.getElementType().isF32())
    return false;
  sparse_tensor::SparseTensorType stt(type);
  if (stt.getLvlRank() == 0 || type.getRank() == 0 ||
      !sparse_tensor::isNOutOfMLT(stt.getLvlType(stt.getLvlRank() - 1)))
    return false;
  int64_t m = sparse_tensor::getM(stt.getLvlType(stt.getLvlRank() - 1));
  return type.getShape().back() == m;
}

/// True when `use` of a sparse value has a sparse lowering known to work.
static bool hasSparseLowering(OpOperand &use) {
  Operation *owner = use.getOwner();
  if (isSingleGroupNMForUpstream(use.get()))
    return isa<func::ReturnOp>(owner);
  // A linear's weight (a micro-kernel or upstream sparsification reads it;
  // a sparse bias has neither), and element-wise ops that
  // smlir-propagate-encodings made compute on stored entries only.
  if (auto linear = dyn_cast<LinearOp>(owner))
    return use.get() == linear.getWeight();
  // A sampled product's pattern is sparse by definition (its verifier);
  // smlir-lower-sampled-matmul lowers it or names what it cannot.
  if (auto sampled = dyn_cast<SampledMatmulOp>(owner))
    return use.get() == sampled.getPattern();
  // A lookup smlir-raise-row-gathers raised (CSR or n:m tables only).
  if (auto gather = dyn_cast<GatherRowsOp>(owner))
    return use.get() == gather.getTable();
  // A CSR matrix smlir-raise-sparse-matmuls gave the SpMM kernel (its verifier).
  if (auto spmm = dyn_cast<SpMMOp>(owner))
    return spmm.hasSparseMatrix() && use.getOperandNumber() == 0;
  if (owner->hasAttr(kInferredEncodingAttrName))
    return true;
  if (isa<func::ReturnOp>(owner) ||
      isa<sparse_tensor::SparseTensorDialect>(owner->getDialect()))
    return true;
  // Operands whose type must stay as it is (a call's, a branch's or a region
  // terminator's, an op's init): a dense value there would be invalid IR.
  // They keep the sparse value; where it goes is for its reader to lower.
  if (isa<CallOpInterface, BranchOpInterface, RegionBranchTerminatorOpInterface>(
          owner))
    return true;
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(owner);
      dps && dps.isDpsInit(&use))
    return true;
  if (auto matmul = dyn_cast<linalg::MatmulOp>(owner))
    return !matmul.hasUserDefinedMaps() && use.getOperandNumber() == 0 &&
           !isSparseTensor(matmul.getInputs()[1]);
  return false;
}

/// The n:m storage of `dense` (an n:m-pruned weight, static shape
/// [..., K]) in `nmType` ((d0, .., dl) -> (d0 : dense, .., dl floordiv m :
/// dense, dl mod m : structured[n, m])), as the caller packs it
/// (sparse_mlir/nm_layout.py, `stored_positions`): exactly n entries per
/// group, its nonzeros padded with its lowest-index zeros, ascending; with
/// `rows` > 1, the positions of the union of the nonzeros of each `rows`
/// consecutive rows, in all of them (the last group of a dimension that
/// `rows` does not divide holds the rows left). Built on buffers and assembled, not
/// with sparse_tensor.convert: the convert drops zeros (a group with fewer
/// than n nonzeros then corrupts the structured level) and stages through a
/// COO buffer whose coordinates, row indices included, have the encoding's
/// crdWidth (8 bits for n:m by default: rows >= 256 wrap). Null where the
/// type is not that n:m layout.
static Value packNM(OpBuilder &b, Location loc, Value dense,
                    RankedTensorType nmType, int64_t rows) {
  using namespace sparse_tensor;
  SparseTensorType stt(nmType);
  int64_t rank = stt.getDimRank();
  if (!stt.hasEncoding() || !stt.hasStaticDimShape() || rank < 1 ||
      stt.getLvlRank() != rank + 1 || !isNOutOfMLT(stt.getLvlType(rank)))
    return Value();
  for (Level l = 0; l < static_cast<Level>(rank); ++l)
    if (!isDenseLT(stt.getLvlType(l)))
      return Value();
  int64_t n = getN(stt.getLvlType(rank)), m = getM(stt.getLvlType(rank));
  ArrayRef<int64_t> shape = nmType.getShape();
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> results;
  for (int64_t d = 0; d + 1 < rank; ++d)
    results.push_back(getAffineDimExpr(d, ctx));
  AffineExpr last = getAffineDimExpr(rank - 1, ctx);
  results.push_back(last.floorDiv(m));
  results.push_back(last % m);
  if (n < 1 || m < n || shape.back() % m != 0 ||
      stt.getDimToLvl() != AffineMap::get(rank, 0, results, ctx))
    return Value();
  int64_t cols = shape.back(), groups = cols / m, lines = 1;
  for (int64_t d = 0; d + 1 < rank; ++d)
    lines *= shape[d];
  // Rows sharing a pattern are consecutive indices of dimension rank - 2,
  // consecutive lines of the [lines, cols] view.
  if (rank < 2 || rows < 1)
    rows = 1;
  int64_t sliceLines = rank < 2 ? 1 : shape[rank - 2];
  int64_t groupsPerSlice = llvm::divideCeil(sliceLines, rows);
  bool partialGroups = sliceLines % rows != 0;
  Type f = nmType.getElementType();
  Type crdType = b.getIntegerType(stt.getCrdWidth() ? stt.getCrdWidth() : 64);
  Type crdElem = stt.getCrdWidth() ? crdType : b.getIndexType();

  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value w = bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(shape, f), dense, /*readOnly=*/true);
  if (rank != 2) {
    SmallVector<ReassociationIndices> reassociation(2);
    for (int64_t d = 0; d + 1 < rank; ++d)
      reassociation[0].push_back(d);
    reassociation[1].push_back(rank - 1);
    w = memref::CollapseShapeOp::create(b, loc, w, reassociation);
  }
  int64_t stored = lines * groups * n;
  auto crdBufType = MemRefType::get({stored}, crdElem);
  auto valBufType = MemRefType::get({stored}, f);
  IntegerAttr align = b.getI64IntegerAttr(64);
  Value crd = memref::AllocOp::create(b, loc, crdBufType, ValueRange(), align);
  Value val = memref::AllocOp::create(b, loc, valBufType, ValueRange(), align);

  Value c0 = idx(0), c1 = idx(1), cm = idx(m), cn = idx(n), cRows = idx(rows),
        cGroups = idx(groups);
  Value zero = arith::ConstantOp::create(b, loc, f, b.getZeroAttr(f));
  // One iteration per (row group, group of m).
  int64_t rowGroups = sliceLines ? lines / sliceLines * groupsPerSlice : 0;
  scf::ParallelOp::create(
      b, loc, ValueRange{c0, c0}, ValueRange{idx(rowGroups), cGroups},
      ValueRange{c1, c1},
      [&](OpBuilder &pb, Location ploc, ValueRange ivs) {
        Value line0 = arith::MulIOp::create(pb, ploc, ivs[0], cRows);
        // Line r of the row group. A partial last group repeats its last
        // line: the union is the same, and the repeated stores write the
        // same values to the same places.
        Value lastLine;
        if (partialGroups) {
          Value cPerSlice = arith::ConstantIndexOp::create(pb, ploc, groupsPerSlice);
          Value cSlice = arith::ConstantIndexOp::create(pb, ploc, sliceLines);
          Value slice = arith::DivUIOp::create(pb, ploc, ivs[0], cPerSlice);
          Value sliceStart = arith::MulIOp::create(pb, ploc, slice, cSlice);
          line0 = arith::AddIOp::create(
              pb, ploc, sliceStart,
              arith::MulIOp::create(
                  pb, ploc, arith::RemUIOp::create(pb, ploc, ivs[0], cPerSlice),
                  cRows));
          lastLine = arith::SubIOp::create(
              pb, ploc, arith::AddIOp::create(pb, ploc, sliceStart, cSlice), c1);
        }
        auto lineOf = [&](OpBuilder &lb, Location lloc, int64_t r) -> Value {
          Value line = arith::AddIOp::create(
              lb, lloc, line0, arith::ConstantIndexOp::create(lb, lloc, r));
          return lastLine ? arith::MinUIOp::create(lb, lloc, line, lastLine)
                                .getResult()
                          : line;
        };
        Value col0 = arith::MulIOp::create(pb, ploc, ivs[1], cm);
        // Whether position k of the group is nonzero in any of its rows.
        auto nonzeroAt = [&](OpBuilder &lb, Location lloc, Value k) -> Value {
          Value col = arith::AddIOp::create(lb, lloc, col0, k);
          Value any;
          for (int64_t r = 0; r < rows; ++r) {
            Value line = lineOf(lb, lloc, r);
            Value x = memref::LoadOp::create(lb, lloc, w, ValueRange{line, col});
            Value nz = arith::CmpFOp::create(lb, lloc, arith::CmpFPredicate::UNE,
                                             x, zero);
            any = any ? arith::OrIOp::create(lb, lloc, any, nz).getResult() : nz;
          }
          return any;
        };
        // Nonzero positions of the group.
        auto count = scf::ForOp::create(
            pb, ploc, c0, cm, c1, ValueRange{c0},
            [&](OpBuilder &lb, Location lloc, Value k, ValueRange iter) {
              Value one = arith::SelectOp::create(
                  lb, lloc, nonzeroAt(lb, lloc, k),
                  arith::ConstantIndexOp::create(lb, lloc, 1),
                  arith::ConstantIndexOp::create(lb, lloc, 0));
              scf::YieldOp::create(
                  lb, lloc, ValueRange{arith::AddIOp::create(lb, lloc, iter[0], one)});
            });
        // Zeros to store (negative, i.e. none, if a group keeps more than n
        // nonzeros, which the caller's pruning rules out; then at most n
        // are stored).
        Value padding = arith::SubIOp::create(pb, ploc, cn, count.getResult(0));
        Value lineStride = arith::MulIOp::create(pb, ploc, cGroups, cn);
        Value groupBase = arith::MulIOp::create(pb, ploc, ivs[1], cn);
        scf::ForOp::create(
            pb, ploc, c0, cm, c1, ValueRange{c0, c0},
            [&](OpBuilder &lb, Location lloc, Value k, ValueRange iter) {
              Value filled = iter[0], zerosBefore = iter[1];
              Value nz = nonzeroAt(lb, lloc, k);
              Value padHere = arith::CmpIOp::create(
                  lb, lloc, arith::CmpIPredicate::slt, zerosBefore, padding);
              Value room = arith::CmpIOp::create(
                  lb, lloc, arith::CmpIPredicate::slt, filled, cn);
              Value selected = arith::AndIOp::create(
                  lb, lloc, arith::OrIOp::create(lb, lloc, nz, padHere), room);
              scf::IfOp::create(lb, lloc, selected, [&](OpBuilder &ib, Location iloc) {
                Value col = arith::AddIOp::create(ib, iloc, col0, k);
                Value k8 = crdElem.isIndex()
                               ? k
                               : arith::IndexCastOp::create(ib, iloc, crdType, k)
                                     .getResult();
                for (int64_t r = 0; r < rows; ++r) {
                  Value line = lineOf(ib, iloc, r);
                  Value at = arith::AddIOp::create(
                      ib, iloc,
                      arith::AddIOp::create(
                          ib, iloc,
                          arith::MulIOp::create(ib, iloc, line, lineStride),
                          groupBase),
                      filled);
                  memref::StoreOp::create(ib, iloc, k8, crd, ValueRange{at});
                  Value x = memref::LoadOp::create(ib, iloc, w, ValueRange{line, col});
                  memref::StoreOp::create(ib, iloc, x, val, ValueRange{at});
                }
                scf::YieldOp::create(ib, iloc);
              });
              Value one = arith::ConstantIndexOp::create(lb, lloc, 1);
              Value zeroIdx = arith::ConstantIndexOp::create(lb, lloc, 0);
              Value nextFilled = arith::AddIOp::create(
                  lb, lloc, filled,
                  arith::SelectOp::create(lb, lloc, selected, one, zeroIdx));
              Value nextZeros = arith::AddIOp::create(
                  lb, lloc, zerosBefore,
                  arith::SelectOp::create(lb, lloc, nz, zeroIdx, one));
              scf::YieldOp::create(lb, lloc, ValueRange{nextFilled, nextZeros});
            });
        scf::ReduceOp::create(pb, ploc);
      });
  Value crdTensor = bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get({stored}, crdElem), crd, /*restrict=*/true,
      /*writable=*/true);
  Value valTensor = bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get({stored}, f), val, /*restrict=*/true,
      /*writable=*/true);
  return sparse_tensor::AssembleOp::create(b, loc, nmType, ValueRange{crdTensor},
                                           valTensor);
}

/// `dense` stored in `sparseType` (the argument's sparse type, for the
/// readers that keep a sparse lowering).
static Value storeSparse(OpBuilder &b, Location loc, Value dense,
                         RankedTensorType sparseType, int64_t nmRows) {
  using namespace sparse_tensor;
  if (Value nm = packNM(b, loc, dense, sparseType, nmRows))
    return nm;
  // Upstream stages a dense -> sparse convert whose level order is not the
  // dense one through a COO buffer with the destination's bit widths, which
  // then hold coordinates (and a position) the destination never stores
  // (BSR's block rows): convert at index width first, then narrow
  // (same level order, no staging).
  SparseTensorType stt(sparseType);
  bool staged = stt.hasEncoding() && !stt.isAllDense() && stt.isAllOrdered() &&
                !stt.isIdentity();
  if (staged && (stt.getPosWidth() != 0 || stt.getCrdWidth() != 0)) {
    Value wide = ConvertOp::create(b, loc, stt.withoutBitWidths().getRankedTensorType(),
                                   dense);
    return ConvertOp::create(b, loc, sparseType, wide);
  }
  return ConvertOp::create(b, loc, sparseType, dense);
}

struct SparseFallbackPass
    : public smlir::impl::SparseFallbackBase<SparseFallbackPass> {
  using SparseFallbackBase::SparseFallbackBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    // Program order of ops, so each warning points at the first reader.
    DenseMap<Operation *, unsigned> order;
    func.walk([&](Operation *op) { order[op] = order.size(); });

    llvm::StringSet<> reported;
    bool failedIntermediates = false;
    fallBackIntermediates(func, order, reported, failedIntermediates);

    // Decide every argument from the original types first: a reader's
    // support may depend on another argument being sparse.
    Block &entry = func.getBody().front();
    SmallVector<std::pair<BlockArgument, SmallVector<Operation *>>> fallbacks;
    for (BlockArgument arg : entry.getArguments()) {
      if (!isSparseTensor(arg))
        continue;
      SmallVector<Operation *> unsupported;
      for (OpOperand &use : arg.getUses())
        if (!hasSparseLowering(use))
          unsupported.push_back(use.getOwner());
      if (unsupported.empty()) {
        func.setArgAttr(arg.getArgNumber(), kStorageAttrName,
                        StorageAttr::get(&getContext(), StorageKind::Sparse,
                                         ""));
        continue;
      }
      llvm::sort(unsupported, [&](Operation *a, Operation *b) {
        return order[a] < order[b];
      });
      fallbacks.emplace_back(arg, std::move(unsupported));
    }
    if (fallbacks.empty()) {
      if (failedIntermediates)
        signalPassFailure();
      return;
    }

    OpBuilder builder(&entry, entry.begin());
    for (auto &[arg, unsupported] : fallbacks) {
      unsigned index = arg.getArgNumber();
      auto name = func.getArgAttrOfType<StringAttr>(index, kTensorNameAttrName);
      auto encoding = func.getArgAttrOfType<EncodingAttrInterface>(
          index, kEncodingAttrName);
      std::string format = encoding ? encoding.getFormatName() : "sparse";
      StringRef tensorName = name ? name.getValue() : StringRef("<argument>");
      for (Operation *op : unsupported)
        report(op, tensorName, format, reported);
      if (fail)
        continue;
      // The caller passes the dense weight; readers that had a sparse
      // lowering (or need the sparse type) get it stored back once.
      auto sparseType = cast<RankedTensorType>(arg.getType());
      SmallVector<OpOperand *> sparseReaders;
      for (OpOperand &use : arg.getUses())
        if (!llvm::is_contained(unsupported, use.getOwner()))
          sparseReaders.push_back(&use);
      arg.setType(RankedTensorType::get(sparseType.getShape(),
                                        sparseType.getElementType()));
      func.setArgAttr(index, kStorageAttrName,
                      StorageAttr::get(&getContext(), StorageKind::Dense,
                                       storageReason(unsupported, format)));
      if (!sparseReaders.empty()) {
        auto nm = dyn_cast_or_null<NMEncodingAttr>(Attribute(encoding));
        Value sparse = storeSparse(builder, arg.getLoc(), arg, sparseType,
                                   nm ? nm.getRows() : 1);
        for (OpOperand *use : sparseReaders)
          use->set(sparse);
      }
    }
    if (fail || failedIntermediates)
      return signalPassFailure();
    func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                   func.getResultTypes()));
  }

  /// Sparse intermediates (smlir.sparsify results): readers without a sparse
  /// lowering read one sparse_tensor.convert back to dense.
  void fallBackIntermediates(func::FuncOp func,
                             const DenseMap<Operation *, unsigned> &order,
                             llvm::StringSet<> &reported, bool &failedAny) {
    SmallVector<SparsifyOp> sparsifiers;
    func.walk([&](SparsifyOp op) {
      if (isSparseTensor(op.getResult()))
        sparsifiers.push_back(op);
    });
    for (SparsifyOp op : sparsifiers) {
      SmallVector<OpOperand *> unsupported;
      for (OpOperand &use : op.getResult().getUses())
        if (!hasSparseLowering(use))
          unsupported.push_back(&use);
      if (unsupported.empty())
        continue;
      llvm::sort(unsupported, [&](OpOperand *a, OpOperand *b) {
        return order.lookup(a->getOwner()) < order.lookup(b->getOwner());
      });
      std::string format = op.getEncoding().getFormatName();
      StringRef name = op.getTensorName().value_or("<intermediate>");
      for (OpOperand *use : unsupported)
        report(use->getOwner(), name, format, reported);
      failedAny |= fail;
      if (fail)
        continue;
      OpBuilder builder(op->getContext());
      builder.setInsertionPointAfter(op);
      Value dense = sparse_tensor::ConvertOp::create(
          builder, op.getLoc(), op.getSource().getType(), op.getResult());
      for (OpOperand *use : unsupported)
        use->set(dense);
    }
  }

  /// "read by 'linalg.generic', 'tensor.extract' (no sparse lowering for csr)".
  static std::string storageReason(ArrayRef<Operation *> unsupported,
                                   StringRef format) {
    llvm::SetVector<StringRef> names;
    for (Operation *op : unsupported)
      names.insert(op->getName().getStringRef());
    std::string reason = "read by ";
    llvm::interleave(
        names, [&](StringRef name) { reason += ("'" + name + "'").str(); },
        [&] { reason += ", "; });
    return reason + " (no sparse lowering for " + format.str() + ")";
  }

  void report(Operation *op, StringRef tensorName, StringRef format,
              llvm::StringSet<> &reported) {
    // Per named location too: two torch ops lowered to the same MLIR op (exp
    // and cos, both linalg.generic) are two warnings, which the caller names
    // by their torch op (a NameLoc is the torch.fx node).
    std::string key =
        (op->getName().getStringRef() + "/" + format + "/" + tensorName).str();
    op->getLoc()->walk([&](Location location) {
      if (auto name = dyn_cast<NameLoc>(location))
        key += "/" + name.getName().str();
      return WalkResult::advance();
    });
    if (!reported.insert(key).second)
      return;
    InFlightDiagnostic diag = fail ? op->emitError() : op->emitWarning();
    diag << "no sparse lowering for '" << op->getName() << "' reading tensor '"
         << tensorName << "' stored as " << format << "; computing it densely";
  }
};

} // namespace
