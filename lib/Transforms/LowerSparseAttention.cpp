//===- LowerSparseAttention.cpp - the fused kernel of smlir.sparse_attention //
//
// The pass: the walk over smlir.sparse_attention ops. The kernel is
// lib/Codegen's (SparseAttention.cpp); the op's attributes carry its
// decisions.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/SDDMMRows.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSPARSEATTENTION
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

struct LowerSparseAttentionPass
    : public smlir::impl::LowerSparseAttentionBase<LowerSparseAttentionPass> {
  void runOnOperation() override {
    SmallVector<SparseAttentionOp> ops;
    getOperation().walk([&](SparseAttentionOp op) { ops.push_back(op); });
    for (SparseAttentionOp op : ops) {
      OpBuilder b(op);
      op.getResult().replaceAllUsesWith(buildSparseAttentionKernel(b, op));
      op.erase();
    }
  }
};

} // namespace
