//===- KernelBuilder.cpp - what every micro-kernel builder emits ----------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

SmallVector<Value> mlir::smlir::codegen::transpose8x8(OpBuilder &b,
                                                      Location loc,
                                                      ArrayRef<Value> rows) {
  auto shuffle = [&](Value l, Value r, ArrayRef<int64_t> mask) -> Value {
    return vector::ShuffleOp::create(b, loc, l, r, mask);
  };
  SmallVector<Value> pairs(8), quads(8), columns(8);
  for (int64_t i = 0; i < 4; ++i) { // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 ..]
    pairs[2 * i] =
        shuffle(rows[2 * i], rows[2 * i + 1], {0, 8, 1, 9, 4, 12, 5, 13});
    pairs[2 * i + 1] =
        shuffle(rows[2 * i], rows[2 * i + 1], {2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int64_t h = 0; h < 8; h += 4) { // [a0 b0 c0 d0 | a4 b4 c4 d4], ...
    for (int64_t i = 0; i < 2; ++i) {
      quads[h + 2 * i] =
          shuffle(pairs[h + i], pairs[h + i + 2], {0, 1, 8, 9, 4, 5, 12, 13});
      quads[h + 2 * i + 1] = shuffle(pairs[h + i], pairs[h + i + 2],
                                     {2, 3, 10, 11, 6, 7, 14, 15});
    }
  }
  for (int64_t c = 0; c < 4; ++c) {
    columns[c] = shuffle(quads[c], quads[c + 4], {0, 1, 2, 3, 8, 9, 10, 11});
    columns[c + 4] =
        shuffle(quads[c], quads[c + 4], {4, 5, 6, 7, 12, 13, 14, 15});
  }
  return columns;
}

void mlir::smlir::codegen::eraseDeadChain(Operation *root) {
  SmallVector<Operation *> worklist = {root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    llvm::SmallPtrSet<Operation *, 4> producers;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        producers.insert(producer);
    op->erase();
    for (Operation *producer : producers)
      if (producer->use_empty() && isMemoryEffectFree(producer))
        worklist.push_back(producer);
  }
}

Value KernelBuilder::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value KernelBuilder::add(Value l, Value r) {
  return arith::AddIOp::create(b, loc, l, r);
}
Value KernelBuilder::mul(Value l, Value r) {
  return arith::MulIOp::create(b, loc, l, r);
}
Value KernelBuilder::toIndex(Value v) {
  if (v.getType().isIndex())
    return v;
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
}
Value KernelBuilder::load(Value memref, ValueRange indices) {
  return memref::LoadOp::create(b, loc, memref, indices);
}
Value KernelBuilder::prefixMask(int64_t lanes, Value count) {
  return vector::CreateMaskOp::create(
      b, loc, VectorType::get({lanes}, b.getI1Type()), ValueRange{count});
}
