//===- TokenBlocks.cpp - the token-block kernel -----------------------------===//
//
// M >= kDecodeTokens: x packed feature-major per block of MB tokens, R x U
// register tiles of yT per block of R weight rows, written through the
// output stages.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

/// M >= kDecodeTokens: token blocks of MB packed into slabs.
void MicrokernelBuilder::buildTokenBlocks() {
  int64_t mBlocks = llvm::divideCeil(lin.M, MB);
  int64_t nBlocks = llvm::divideCeil(lin.N, R);
  // Few token blocks (decode): split the weight rows across threads too.
  // Many: split them in chunks that fit L2, each read by every token
  // block in turn (chunks the outer loop).
  bool chunksOuter = mBlocks >= 8;
  int64_t chunks = chunksOuter ? std::min<int64_t>(nBlocks, cacheChunks())
                               : std::min<int64_t>(nBlocks, 16);
  // Chunks outer: a static schedule gives each of T threads chunks / T
  // chunks (all token blocks of each), even for T = 1, 2, 4 with a multiple
  // of 4. (18 chunks of 11 row blocks and one of 5 left ViT-base's
  // 3072 -> 768 one thread with 93 row blocks, the other 99.)
  if (chunksOuter && chunks > 1)
    chunks = std::min<int64_t>(nBlocks, llvm::alignTo(chunks, 4));
  chunksOuter = chunksOuter && chunks > 1;
  // x packed feature-major per token block: block mb holds
  // slab[k * MB + j] = x[mb * MB + j, k]. Packed once, before the rows are
  // split across threads; heap, not stack, so that large K and many
  // blocks fit (ownership-based deallocation frees it).
  Value slabs = memref::AllocOp::create(
      b, loc, MemRefType::get({mBlocks * slabSize()}, f32),
      b.getI64IntegerAttr(64));
  // With one chunk per token block, each iteration packs its own slab
  // right before reading it (from cache, not from memory after all blocks
  // were packed); several chunks of one block need it packed first.
  bool packInPlace = chunks == 1;
  if (!packInPlace)
    scf::ParallelOp::create(b, loc, ValueRange{idx(0)}, ValueRange{idx(mBlocks)},
                            ValueRange{idx(1)},
                            [&](OpBuilder &, Location, ValueRange ivs) {
                              pack(slabs, ivs[0]);
                              if (bf16Pairs)
                                packPairs(slabs, ivs[0]);
                            });
  // (Interleaved entries hold their slab offset in 32 bits.) bf16 pairs
  // from 2 blocks on: a pair's offset and bits take ~20 scalar ops per row
  // and group, as much as interleaving them once.
  int64_t interleaveBlocks = bf16Pairs ? 2 : kInterleaveMinTokenBlocks;
  if (mBlocks >= interleaveBlocks && slabSize() < (int64_t{1} << 31))
    access->interleave(*this);
  // n:m over a slab larger than L1: k in slices of whole groups, every
  // row block of the thread per slice, the R x MB partial sums of a row
  // block kept in `partial` (yT's layout per token block) between slices.
  Value partial;
  if (slices > 1)
    partial = memref::AllocOp::create(
        b, loc, MemRefType::get({mBlocks * nBlocks * R * MB}, f32),
        b.getI64IntegerAttr(64));
  // Tiles go to y through a per-iteration stage of MB tokens x W columns
  // (stageRowBlocks row blocks), copied out a token row at a time: y's
  // rows are then written in W-float runs, not R-float pieces, which at
  // row strides of a multiple of 4 KB (N = 1024, 3072, ...) all fall in
  // one L1 set and were evicted between the pieces (~1.4 ms of 9.5 at
  // 1024 x 768 -> 3072).
  stages = memref::AllocOp::create(
      b, loc, MemRefType::get({mBlocks * chunks * MB * stageWidth()}, f32),
      b.getI64IntegerAttr(64));
  // Every stage is whole (no masked copy) when one thread walks all row
  // blocks in whole stages and R divides N.
  stagesMayBePartial =
      chunks > 1 || nBlocks % stageRowBlocks() != 0 || lin.N % R != 0;
  // One thread's iterations are consecutive (static schedule over the
  // collapsed loops): with chunks outer, its token blocks share a chunk.
  int64_t outer = chunksOuter ? chunks : mBlocks;
  int64_t inner = chunksOuter ? mBlocks : chunks;
  scf::ParallelOp::create(
      b, loc, ValueRange{idx(0), idx(0)}, ValueRange{idx(outer), idx(inner)},
      ValueRange{idx(1), idx(1)},
      [&](OpBuilder &, Location, ValueRange ivs) {
        Value mb = chunksOuter ? ivs[1] : ivs[0];
        Value chunk = chunksOuter ? ivs[0] : ivs[1];
        if (packInPlace) {
          pack(slabs, mb);
          if (bf16Pairs)
            packPairs(slabs, mb);
        }
        stageBase = mul(add(mul(mb, idx(chunks)), chunk),
                        idx(MB * stageWidth()));
        Value m0 = mul(mb, idx(MB));
        // The token block's slab as its own memref: its base pointer is
        // computed once, not added to every stored entry's offset.
        Value slab = memref::SubViewOp::create(
            b, loc, slabs,
            ArrayRef<OpFoldResult>{mul(mb, idx(slabSize()))},
            ArrayRef<OpFoldResult>{b.getIndexAttr(slabSize())},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
        Value first, last;
        chunkRowBlocks(chunk, chunks, first, last);
        if (slices > 1) {
          slicedRowBlocks(slab, partial, mb, m0, first, last);
        } else {
          stagedRowBlocks(first, last, m0, Value(), [&](Value nb, Value column) {
            rowBlock(slab, m0, nb, column);
          });
        }
      });
}

/// Row blocks [first, last) of chunk `chunk` of `chunks`: as even as can
/// be (sizes differ by at most one), not ceil-sized with a short last one.
void MicrokernelBuilder::chunkRowBlocks(Value chunk, int64_t chunks,
                                        Value &first, Value &last) {
  int64_t nBlocks = llvm::divideCeil(lin.N, R);
  if (nBlocks % chunks == 0) {
    first = mul(chunk, idx(nBlocks / chunks));
    last = add(first, idx(nBlocks / chunks));
    return;
  }
  first = arith::DivUIOp::create(b, loc, mul(chunk, idx(nBlocks)), idx(chunks));
  last = arith::DivUIOp::create(b, loc, mul(add(chunk, idx(1)), idx(nBlocks)),
                                idx(chunks));
}

/// Row chunks whose stored entries fit kWeightChunkBytes (8 bytes an
/// entry as the token loops read them: value and offset interleaved).
int64_t MicrokernelBuilder::cacheChunks() const {
  // bf16 pairs: one chunk, so each token block's pair slab (1.5x the f32
  // slab) is packed in place and read by every row block from L2, the
  // weight streaming from L3 instead. Chunks of 512 KB re-read every
  // block's pair slab from memory once per chunk: 1024 x 3072 -> 768 ran
  // 24-29 ms in 12 chunks, 12.1 ms in one (1 thread; 768 -> 3072 13.6 ms
  // either way).
  if (bf16Pairs)
    return 1;
  double bytes = access->entriesPerRow() * access->bytesPerEntry() * double(lin.N);
  return std::max<int64_t>(1, int64_t(std::ceil(bytes / kWeightChunkBytes)));
}

/// Block mb of `slabs`: slab[k * MB + j] = x[mb * MB + j, k], zero past
/// the last token. 8 x 8 tiles are transposed in registers whatever the
/// lanes (8-lane vectors: 8 row loads, 24 shuffles, 8 slab-row stores per
/// 64 values; MB is a multiple of 8); the last K mod 8 features one value
/// at a time.
void MicrokernelBuilder::pack(Value slabs, Value mb) {
  Value m0 = mul(mb, idx(MB));
  Value slab = mul(mb, idx(slabSize()));
  Value zero = arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(0));
  bool partialBlocks = lin.M % MB != 0;
  auto octType = VectorType::get({8}, f32);
  Value zeroOct = arith::ConstantOp::create(
      b, loc, octType, DenseElementsAttr::get(octType, 0.0f));
  // Half precision x is extended as it is packed: the slab is f32.
  auto storageOct = VectorType::get({8}, storage);
  int64_t vectorK = MB % 8 == 0 ? lin.K / 8 * 8 : 0;
  if (vectorK > 0)
    scf::ForOp::create(
        b, loc, idx(0), idx(vectorK), idx(8), ValueRange{},
        [&](OpBuilder &, Location, Value k0, ValueRange) {
          for (int64_t g = 0; g < MB / 8; ++g) {
            SmallVector<Value> rows;
            for (int64_t i = 0; i < 8; ++i) {
              Value m = add(m0, idx(g * 8 + i));
              Value mClamped = arith::MinUIOp::create(b, loc, m, idx(lin.M - 1));
              Value row = widen(vector::LoadOp::create(
                  b, loc, storageOct, x, ValueRange{mClamped, k0}));
              if (partialBlocks)
                row = arith::SelectOp::create(
                    b, loc,
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, m,
                                          idx(lin.M)),
                    row, zeroOct);
              rows.push_back(row);
            }
            SmallVector<Value> columns = transpose8x8(b, loc, rows);
            for (int64_t c = 0; c < 8; ++c)
              vector::StoreOp::create(
                  b, loc, columns[c], slabs,
                  ValueRange{add(slab, add(mul(add(k0, idx(c)), idx(MB)),
                                           idx(g * 8)))});
          }
          scf::YieldOp::create(b, loc);
        });
  if (vectorK == lin.K)
    return;
  scf::ForOp::create(
      b, loc, idx(0), idx(MB), idx(1), ValueRange{},
      [&](OpBuilder &, Location, Value j, ValueRange) {
        Value m = add(m0, j);
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             m, idx(lin.M));
        scf::ForOp::create(
            b, loc, idx(vectorK), idx(lin.K), idx(1), ValueRange{},
            [&](OpBuilder &, Location, Value k, ValueRange) {
              Value mClamped = arith::MinUIOp::create(b, loc, m, idx(lin.M - 1));
              Value v = widen(load(x, {mClamped, k}));
              v = arith::SelectOp::create(b, loc, inside, v, zero);
              memref::StoreOp::create(b, loc, v, slabs,
                                      add(slab, add(mul(k, idx(MB)), j)));
              scf::YieldOp::create(b, loc);
            });
        scf::YieldOp::create(b, loc);
      });
}

/// Rows n0 .. n0 + R of yT for tokens m0 .. m0 + MB, written to y.
void MicrokernelBuilder::rowBlock(Value slab, Value m0, Value nb, Value column) {
  Value n0 = mul(nb, idx(R));
  SmallVector<Value> acc(R * U, zeroVector());
  access->accumulateRowBlock(*this, slab, n0, nb, acc);
  store(acc, column);
}

/// Row blocks [first, last) of token block mb, k in `slices` slices of
/// `sliceGroups` n:m groups: slice-major, so a row block's slab reads stay
/// in the slice's few KB.
void MicrokernelBuilder::slicedRowBlocks(Value slab, Value partial, Value mb, Value m0,
                     Value first, Value last) {
  int64_t groups = lin.K / lin.layout.m;
  int64_t nBlocks = llvm::divideCeil(lin.N, R);
  Value zero = zeroVector();
  SmallVector<Type> accTypes(R * U, vecType);
  scf::ForOp::create(
      b, loc, idx(0), idx(slices), idx(1), ValueRange{},
      [&](OpBuilder &, Location, Value slice, ValueRange) {
        Value g0 = mul(slice, idx(sliceGroups));
        Value g1 = arith::MinUIOp::create(b, loc, add(g0, idx(sliceGroups)),
                                          idx(groups));
        Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                              slice, idx(0));
        Value isLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             slice, idx(slices - 1));
        stagedRowBlocks(
            first, last, m0, isLast, [&](Value nb, Value column) {
              Value n0 = mul(nb, idx(R));
              // partial[((mb * nBlocks + nb) * R + r) * MB + u * V]
              Value tile = mul(add(mul(mb, idx(nBlocks)), nb), idx(R * MB));
              auto init = scf::IfOp::create(
                  b, loc, accTypes, isFirst, /*withElseRegion=*/true);
              b.setInsertionPointToStart(&init.getThenRegion().front());
              scf::YieldOp::create(b, loc, SmallVector<Value>(R * U, zero));
              b.setInsertionPointToStart(&init.getElseRegion().front());
              SmallVector<Value> loaded;
              for (int64_t i = 0; i < R * U; ++i)
                loaded.push_back(vector::LoadOp::create(
                    b, loc, vecType, partial, ValueRange{add(tile, idx(i * V))}));
              scf::YieldOp::create(b, loc, loaded);
              b.setInsertionPointAfter(init);
              SmallVector<Value> acc(init.getResults().begin(), init.getResults().end());
              SmallVector<Value> rowStarts, rowLengths;
              rowExtents(n0, rowStarts, rowLengths);
              access->accumulateGroups(*this, slab, nb, g0, g1, rowStarts,
                                       acc);
              scf::IfOp::create(
                  b, loc, isLast,
                  [&](OpBuilder &, Location) {
                    store(acc, column);
                    scf::YieldOp::create(b, loc);
                  },
                  [&](OpBuilder &, Location) {
                    for (int64_t i = 0; i < R * U; ++i)
                      vector::StoreOp::create(b, loc, acc[i], partial,
                                              ValueRange{add(tile, idx(i * V))});
                    scf::YieldOp::create(b, loc);
                  });
            });
        scf::YieldOp::create(b, loc);
      });
}
