// RUN: sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=2 vectors=1 nm-rows=2 nm-vectors=1 dense-rows=2 dense-vectors=1 lanes=8" -split-input-file | FileCheck %s
// RUN: not sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=1000000" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not sparse-mlir-opt %s -smlir-lower-sparse-linear="lanes=7" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// OPTIONS: error: smlir-lower-sparse-linear: lanes must be 4, 8, 16 or 32 and tile sizes 1 to 16
// An integer option llvm::cl cannot parse gets a message (MLIR alone printed an empty error).
// RUN: not sparse-mlir-opt %s -smlir-lower-sparse-linear="rows=18446744073709551615" -split-input-file 2>&1 | FileCheck %s --check-prefix=UNPARSED
// UNPARSED: error: smlir-lower-sparse-linear: option 'rows' expects an integer (int64), got '18446744073709551615'

// An smlir.linear with a CSR W[N, K] becomes explicit loops over W's
// buffers: x is packed per block of 8 tokens, 2 rows run in lockstep with
// one vector accumulator each, then each CSR row finishes alone, and the
// 2 x 8 tile is stored as 8 rows of y (masked vectors of 2 lanes). No
// smlir.linear remains.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @csr(
// CHECK-SAME:    %[[W:.*]]: tensor<5x64xf32, #{{.*}}>, %[[X:.*]]: tensor<16x64xf32>)
// CHECK-NOT:     smlir.linear
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only
// CHECK-DAG:     %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x5xf32>
// CHECK-DAG:     %[[POS:.*]] = sparse_tensor.positions %[[W]] {level = 1 : index}
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %[[W]] {level = 1 : index}
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values %[[W]]
// 2 blocks of 8 tokens, each packed as a 64 x 8 slab.
// CHECK:         %[[SLABS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
// 8 x 8 tiles of x are transposed in registers (unpack, shuffle, halves).
// CHECK:         scf.parallel
// CHECK:           vector.load %[[XB]]
// CHECK-COUNT-24:  vector.shuffle
// CHECK:           vector.store {{.*}}, %[[SLABS]]
// Output stages: 2 token blocks x 3 chunks of row blocks x 8 tokens x 64.
// CHECK:         %[[STAGES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<3072xf32>
// CHECK:         scf.parallel
// The token block's slab is a view: one base pointer for all its reads.
// CHECK:           %[[SLAB:.*]] = memref.subview %[[SLABS]][%{{.*}}] [512] [1]
// Lockstep over the entries both rows have: two independent chains.
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             memref.load %[[CRD]]
// CHECK:             %[[W0:.*]] = vector.broadcast {{.*}} : f32 to vector<8xf32>
// CHECK:             %[[X0:.*]] = vector.load %[[SLAB]]
// CHECK:             vector.fma %[[W0]], %[[X0]]
// CHECK:             vector.fma
// CHECK:             scf.yield {{.*}} : vector<8xf32>, vector<8xf32>
// The rest of each row.
// CHECK:           scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           scf.for {{.*}} -> (vector<8xf32>)
// The 2 x 8 tile goes to the token block's output stage (64 columns), which
// is copied to y a token row at a time; columns past N = 5 are masked off.
// CHECK:           vector.from_elements {{.*}} : vector<2xf32>
// CHECK:           vector.store {{.*}}, %[[STAGES]]
// CHECK:           vector.load %[[STAGES]]
// CHECK:           vector.create_mask {{.*}} : vector<8xi1>
// CHECK:           vector.maskedstore %[[Y]]
// CHECK:         %[[RES:.*]] = bufferization.to_tensor %[[Y]] restrict writable : memref<16x5xf32> to tensor<16x5xf32>
// CHECK-NOT:     smlir.linear
// CHECK:         return %[[RES]]
func.func @csr(%w: tensor<5x64xf32, #CSR>, %x: tensor<16x64xf32>) -> tensor<16x5xf32> {
  %y = smlir.linear %x, %w : tensor<16x64xf32>, tensor<5x64xf32, #CSR> -> tensor<16x5xf32>
  return %y : tensor<16x5xf32>
}

// -----

// CSR with 4 or more token blocks (here 4 of 8 tokens): the row blocks are
// interleaved once per call, padded with zeros to their longest row, each
// entry one i64: its pre-scaled slab offset (k * 8) above its value's bits.
// The token loop then walks one index per row block, all rows in lockstep
// and no per-row tails, one load per entry besides the slab's.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @csr_interleaved(
// CHECK:         %[[STARTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xindex>
// CHECK:         %[[TOTAL:.*]] = scf.for {{.*}} iter_args({{.*}}) -> (index)
// CHECK:           arith.maxui
// CHECK:         %[[SIZE:.*]] = arith.muli %[[TOTAL]], %{{.*}} : index
// CHECK:         %[[ENTRIES:.*]] = memref.alloc(%[[SIZE]]) {alignment = 64 : i64} : memref<?xi64>
// CHECK:         scf.parallel
// CHECK:           scf.if
// CHECK:             arith.index_castui {{.*}} : index to i32
// CHECK:             arith.bitcast {{.*}} : f32 to i32
// CHECK:             arith.shli
// CHECK:             arith.ori
// CHECK:           } else {
// CHECK:           memref.store {{.*}}, %[[ENTRIES]]
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} step %c2{{(_[0-9]+)?}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[E0:.*]] = memref.load %[[ENTRIES]]
// CHECK:             arith.trunci %[[E0]] : i64 to i32
// CHECK:             arith.shrui %[[E0]]
// CHECK:             vector.fma
// CHECK:             memref.load %[[ENTRIES]]
// CHECK:             vector.fma
// CHECK:             scf.yield
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           vector.maskedstore
func.func @csr_interleaved(%w: tensor<5x64xf32, #CSR>, %x: tensor<32x64xf32>) -> tensor<32x5xf32> {
  %y = smlir.linear %x, %w : tensor<32x64xf32>, tensor<5x64xf32, #CSR> -> tensor<32x5xf32>
  return %y : tensor<32x5xf32>
}

// -----

// 2:4: every row has K/4 groups of 2 entries, so the rows run in lockstep
// over groups (no per-row tail); the in-group i8 coordinate is offset by
// the group's first k (group * 4).

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm(
// CHECK-NOT:     sparse_tensor.positions
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 2 : index} : tensor<4x32xf32, #{{.*}}> to memref<?xi8>
// CHECK:         scf.parallel
// CHECK:         scf.parallel
// CHECK:           scf.for %[[G:.*]] = {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[C4:.*]] = arith.constant 4 : index
// CHECK:             arith.muli %[[G]], %[[C4]]
// CHECK:             %[[K:.*]] = memref.load %[[CRD]]
// CHECK:             arith.index_castui %[[K]] : i8 to index
// CHECK-COUNT-4:     vector.fma
// CHECK:             scf.yield
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// Whole tiles (R = 2 divides N = 4): plain stores into the stage; N is
// less than its 64 columns, so its copy to y is masked.
// CHECK-NOT:       vector.create_mask {{.*}} : vector<2xi1>
// CHECK:           vector.store {{.*}} : memref<{{[0-9]+}}xf32>, vector<2xf32>
// CHECK:           vector.maskedstore
func.func @nm(%w: tensor<4x32xf32, #NM>, %x: tensor<8x32xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x32xf32>, tensor<4x32xf32, #NM> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// 2:4 read by 4 token blocks: interleaved once per call like CSR, without
// padding (rows are all as long): entry e of group g of row r at
// ((block * groups + g) * 2 + e) * 2 + r, its slab offset
// ((g * 4 + crd) * 8) above its value's bits; the token loop walks the
// block's range two entries (one per row) at a time.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_interleaved(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 2 : index} : tensor<4x32xf32, #{{.*}}> to memref<?xi8>
// CHECK:         %[[ENTRIES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64xi64>
// CHECK:         scf.parallel
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to %c16{{(_[0-9]+)?}}
// CHECK:             arith.divui %[[J]]
// CHECK:             memref.load %[[CRD]]
// CHECK:             arith.shli
// CHECK:             memref.store {{.*}}, %[[ENTRIES]]
// CHECK:             memref.load %[[CRD]]
// CHECK:             memref.store {{.*}}, %[[ENTRIES]]
// CHECK:         scf.parallel
// CHECK:           %[[C32:.*]] = arith.constant 32 : index
// CHECK:           %[[LO:.*]] = arith.muli %{{.*}}, %[[C32]]
// CHECK:           %[[HI:.*]] = arith.addi %[[LO]]
// CHECK:           scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c2{{(_[0-9]+)?}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             memref.load %[[ENTRIES]]
// CHECK:             vector.fma
// CHECK:             memref.load %[[ENTRIES]]
// CHECK:             vector.fma
// CHECK:             scf.yield
func.func @nm_interleaved(%w: tensor<4x32xf32, #NM>, %x: tensor<32x32xf32>) -> tensor<32x4xf32> {
  %y = smlir.linear %x, %w : tensor<32x32xf32>, tensor<4x32xf32, #NM> -> tensor<32x4xf32>
  return %y : tensor<32x4xf32>
}

// -----

// 2:4 with K = 1024: the 8-token slab (32 KB) is read in k-slices of 128
// groups (16 KB). Each thread runs every row block per slice; a row block
// starts from zero in slice 0, else from its partial sums, and stores them
// back, except after the last slice, when it writes y.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_k_slices(
// CHECK:         %[[PARTIAL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
// CHECK:         scf.parallel
// One chunk of rows per token block: the block packs its own slab first.
// CHECK-COUNT-24:    vector.shuffle
// CHECK:           scf.for %[[SLICE:.*]] = %{{.*}} to %c2{{(_[0-9]+)?}} step
// CHECK:             %[[C128:.*]] = arith.constant 128 : index
// CHECK:             %[[G0:.*]] = arith.muli %[[SLICE]], %[[C128]]
// CHECK:             %[[G1:.*]] = arith.minui
// CHECK:             scf.for
// CHECK:               %[[INIT:.*]]:2 = scf.if
// CHECK:                 scf.yield {{.*}} : vector<8xf32>, vector<8xf32>
// CHECK:               } else {
// CHECK:                 vector.load %[[PARTIAL]]
// CHECK:                 vector.load %[[PARTIAL]]
// CHECK:               scf.for %{{.*}} = %[[G0]] to %[[G1]] {{.*}} iter_args(%{{.*}} = %[[INIT]]#0, %{{.*}} = %[[INIT]]#1)
// CHECK:               scf.if
// CHECK:                 vector.store {{.*}} : memref<{{[0-9]+}}xf32>, vector<2xf32>
// CHECK:               } else {
// CHECK:                 vector.store {{.*}}, %[[PARTIAL]]
// CHECK:                 vector.store {{.*}}, %[[PARTIAL]]
// After the last slice, the stage goes to y.
// CHECK:             scf.if
// CHECK:               vector.maskedstore
func.func @nm_k_slices(%w: tensor<2x1024xf32, #NM>, %x: tensor<8x1024xf32>) -> tensor<8x2xf32> {
  %y = smlir.linear %x, %w : tensor<8x1024xf32>, tensor<2x1024xf32, #NM> -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

// A weight past the L2 budget (2:4, 1024 x 256: 512 K entries of 8 bytes,
// 1 MB) read by 8 token blocks: its row blocks go in 2 chunks, rounded up
// to 4 (1, 2 or 4 threads then get as many), the outer dimension of the
// token loop (chunk, token block), so that one thread's consecutive
// iterations read one chunk from L2. Chunk c covers row blocks
// [c * 128, c * 128 + 128); slabs are packed before (a slab is read by
// every chunk).

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_row_chunks(
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%c8{{(_[0-9]+)?}})
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<131072xi64>
// CHECK:         scf.parallel (%[[CHUNK:.*]], %[[MB:.*]]) = (%{{.*}}, %{{.*}}) to (%c4{{(_[0-9]+)?}}, %c8{{(_[0-9]+)?}})
// CHECK:           %[[C128:.*]] = arith.constant 128 : index
// CHECK:           %[[FIRST:.*]] = arith.muli %[[CHUNK]], %[[C128]]
// CHECK:           %[[LAST:.*]] = arith.addi %[[FIRST]]
// CHECK:           scf.for %{{.*}} = %[[FIRST]] to %[[LAST]]
func.func @nm_row_chunks(%w: tensor<1024x256xf32, #NM>, %x: tensor<64x256xf32>) -> tensor<64x1024xf32> {
  %y = smlir.linear %x, %w : tensor<64x256xf32>, tensor<1024x256xf32, #NM> -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}

// -----

// 511 row blocks in 4 chunks: chunk c covers [c * 511 / 4, (c + 1) * 511 / 4)
// (127 or 128 row blocks), not 3 of 128 and a last one of 127.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_row_chunks_even(
// CHECK:         scf.parallel (%[[CHUNK:.*]], %[[MB:.*]]) = (%{{.*}}, %{{.*}}) to (%c4{{(_[0-9]+)?}}, %c8{{(_[0-9]+)?}})
// CHECK:           %[[C511:.*]] = arith.constant 511 : index
// CHECK:           %[[A:.*]] = arith.muli %[[CHUNK]], %[[C511]]
// CHECK:           %[[FIRST:.*]] = arith.divui %[[A]], %c4
// CHECK:           %[[NEXT:.*]] = arith.addi %[[CHUNK]]
// CHECK:           %[[B:.*]] = arith.muli %[[NEXT]]
// CHECK:           %[[LAST:.*]] = arith.divui %[[B]]
// CHECK:           scf.for %{{.*}} = %[[FIRST]] to %[[LAST]]
func.func @nm_row_chunks_even(%w: tensor<1022x256xf32, #NM>, %x: tensor<64x256xf32>) -> tensor<64x1022xf32> {
  %y = smlir.linear %x, %w : tensor<64x256xf32>, tensor<1022x256xf32, #NM> -> tensor<64x1022xf32>
  return %y : tensor<64x1022xf32>
}

// -----

// 2:4 whose rows share one pattern in pairs (the argument's smlir encoding
// says rows = 2): per stored k one coordinate load and one slab vector,
// shared by the tile's two rows (a broadcast value and an FMA each).

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_shared_rows(
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 2 : index} : tensor<4x32xf32, #{{.*}}> to memref<?xi8>
// CHECK:         smlir.kernel "linear_2of4r2_8x32x4"
// CHECK:         scf.for %{{.*}} iter_args(%[[A0:arg[0-9]+]] = %{{.*}}, %[[A1:arg[0-9]+]] = %{{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:           memref.load %[[CRD]]
// CHECK:           %[[X0:.*]] = vector.load
// CHECK:           %[[F0:.*]] = vector.fma %{{.*}}, %[[X0]], %[[A0]]
// CHECK:           %[[F1:.*]] = vector.fma %{{.*}}, %[[X0]], %[[A1]]
// CHECK:           memref.load %[[CRD]]
// CHECK:           %[[X1:.*]] = vector.load
// CHECK:           vector.fma %{{.*}}, %[[X1]], %[[F0]]
// CHECK:           vector.fma %{{.*}}, %[[X1]], %[[F1]]
// CHECK-NOT:       memref.load %[[CRD]]
// CHECK:           scf.yield
func.func @nm_shared_rows(%w: tensor<4x32xf32, #NM> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 2>},
                          %x: tensor<8x32xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x32xf32>, tensor<4x32xf32, #NM> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Rows sharing a pattern in fours over 6 rows: the last group holds rows 4
// and 5. The last 4-row tile (a tile lies inside one group) repeats row 5
// for rows 6 and 7 (min(n, 5)): the same group, whose coordinates the tile
// reads from its first row; their outputs are masked off.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @nm_shared_rows_partial_last_group(
// CHECK:         smlir.kernel "linear_2of4r4_8x32x6"
// CHECK:         scf.parallel
// CHECK-DAG:       %[[C5:.*]] = arith.constant 5 : index
// CHECK:           arith.minui %{{.*}}, %[[C5]] : index
// CHECK:           scf.for
// CHECK:             memref.load %{{.*}} : memref<?xi8>
// CHECK:             vector.fma
func.func @nm_shared_rows_partial_last_group(%w: tensor<6x32xf32, #NM> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 4>},
                                             %x: tensor<8x32xf32>) -> tensor<8x6xf32> {
  %y = smlir.linear %x, %w : tensor<8x32xf32>, tensor<6x32xf32, #NM> -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

// A dense W: every k loads one slab row that both weight rows use.

// CHECK-LABEL: func.func @dense(
// CHECK:         %[[WB:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<4x16xf32> to memref<4x16xf32>
// CHECK:         scf.parallel
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[XV:.*]] = vector.load
// CHECK-NOT:         vector.load
// CHECK:             memref.load %[[WB]]
// CHECK:             vector.fma %{{.*}}, %[[XV]]
// CHECK:             memref.load %[[WB]]
// CHECK:             vector.fma %{{.*}}, %[[XV]]
// CHECK-NOT:     smlir.linear
func.func @dense(%w: tensor<4x16xf32>, %x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Left to smlir-decompose-linear: a CSC weight (no micro-kernel for it).

#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>

// CHECK-LABEL: func.func @csc_untouched(
// CHECK-NOT:     scf.parallel
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<4x16xf32, #{{.*}}> -> tensor<8x4xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @csc_untouched(%w: tensor<4x16xf32, #CSC>, %x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w : tensor<8x16xf32>, tensor<4x16xf32, #CSC> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Left to smlir-decompose-linear: a linear with a bias.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @bias_untouched(
// CHECK-NOT:     scf.parallel
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} bias %{{.*}} : tensor<8x16xf32>, tensor<4x16xf32, #{{.*}}>, tensor<4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @bias_untouched(%w: tensor<4x16xf32, #CSR>, %x: tensor<8x16xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %y = smlir.linear %x, %w bias %b : tensor<8x16xf32>, tensor<4x16xf32, #CSR>, tensor<4xf32> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Left to smlir-decompose-linear: a dynamic number of tokens.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @dynamic_tokens_untouched(
// CHECK-NOT:     scf.parallel
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<4x16xf32, #{{.*}}> -> tensor<?x4xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @dynamic_tokens_untouched(%w: tensor<4x16xf32, #CSR>, %x: tensor<?x16xf32>) -> tensor<?x4xf32> {
  %y = smlir.linear %x, %w : tensor<?x16xf32>, tensor<4x16xf32, #CSR> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// Left to smlir-decompose-linear: f16 values (the micro-kernels are f32).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @f16_untouched(
// CHECK-NOT:     scf.parallel
// CHECK:         %[[Y:.*]] = smlir.linear %{{.*}}, %{{.*}} : tensor<8x16xf16>, tensor<4x16xf16, #{{.*}}> -> tensor<8x4xf16>
// CHECK-NEXT:    return %[[Y]]
func.func @f16_untouched(%w: tensor<4x16xf16, #CSR>, %x: tensor<8x16xf16>) -> tensor<8x4xf16> {
  %y = smlir.linear %x, %w : tensor<8x16xf16>, tensor<4x16xf16, #CSR> -> tensor<8x4xf16>
  return %y : tensor<8x4xf16>
}

// -----

// Left to smlir-decompose-linear: a wider result than f32 (f32 x f32 ->
// f64 accumulation). (f16 x f16 -> f32 is the half kernel's:
// smlir-lower-sparse-linear-half.mlir.)

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @f32_to_f64_untouched(
// CHECK-NOT:     scf.parallel
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<4x16xf32, #{{.*}}> -> tensor<8x4xf64>
func.func @f32_to_f64_untouched(%w: tensor<4x16xf32, #CSR>, %x: tensor<8x16xf32>) -> tensor<8x4xf64> {
  %y = smlir.linear %x, %w : tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<8x4xf64>
  return %y : tensor<8x4xf64>
}

// -----

// Decode (1 token): dot products along k. A dense W reads 8 k at a time
// from x and from each of the 2 rows, then reduces; the 4 k left over are
// scalar FMAs; results are stored one element at a time.

// CHECK-LABEL: func.func @decode_dense(
// CHECK-NOT:     memref.alloc() {{.*}} : memref<{{[0-9]+}}xf32>
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[XV:.*]] = vector.load %{{.*}} : memref<1x20xf32>, vector<8xf32>
// CHECK:             %[[WV:.*]] = vector.load %{{.*}} : memref<3x20xf32>, vector<8xf32>
// CHECK:             vector.fma %[[WV]], %[[XV]]
// CHECK:           vector.reduction <add>
// CHECK:           vector.reduction <add>
// CHECK-COUNT-8:   math.fma
// CHECK:           memref.store
func.func @decode_dense(%w: tensor<3x20xf32>, %x: tensor<1x20xf32>) -> tensor<1x3xf32> {
  %y = smlir.linear %x, %w : tensor<1x20xf32>, tensor<3x20xf32> -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Decode with a CSR W: 8 stored entries at a time, their coordinates and
// values loaded as vectors and x gathered at those coordinates; both rows
// in lockstep over the vectors they both have, then each row's own vectors
// and its last (< 8) entries as scalar FMAs; one reduction per row.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 16 }>

// CHECK-LABEL: func.func @decode_csr(
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<1x64xf32> to memref<1x64xf32>
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %{{.*}} {level = 1 : index} : tensor<3x64xf32, #{{.*}}> to memref<?xi16>
// CHECK-DAG:     %[[VAL:.*]] = sparse_tensor.values
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} step %[[C8:.*]] iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[K16:.*]] = vector.load %[[CRD]]{{.*}} : memref<?xi16>, vector<8xi16>
// CHECK:             %[[K:.*]] = arith.extui %[[K16]] : vector<8xi16> to vector<8xi32>
// CHECK:             %[[XV:.*]] = vector.gather %[[XB]][%{{.*}}, %{{.*}}] [%[[K]]]
// CHECK:             %[[WV:.*]] = vector.load %[[VAL]]
// CHECK:             vector.fma %[[WV]], %[[XV]]
// CHECK:             vector.gather
// CHECK:             vector.fma
// CHECK:           scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           scf.for {{.*}} -> (f32)
// CHECK:             math.fma
// CHECK:           vector.reduction <add>
// CHECK:           scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           scf.for {{.*}} -> (f32)
// CHECK:           vector.reduction <add>
// CHECK:           memref.store
func.func @decode_csr(%w: tensor<3x64xf32, #CSR>, %x: tensor<1x64xf32>) -> tensor<1x3xf32> {
  %y = smlir.linear %x, %w : tensor<1x64xf32>, tensor<3x64xf32, #CSR> -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Decode with a 2:4 W: a vector of 8 entries covers 4 whole groups, so its
// k are the in-group coordinates plus group * 4, the groups' offsets a
// constant pattern (0, 0, 4, 4, 8, 8, 12, 12) on the first group's k. All
// rows are as long: no per-row vectors after the lockstep.

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

// CHECK-LABEL: func.func @decode_nm(
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK:             %[[K8:.*]] = vector.load {{.*}} : memref<?xi8>, vector<8xi8>
// CHECK:             %[[K:.*]] = arith.extui %[[K8]] : vector<8xi8> to vector<8xi32>
// CHECK-DAG:         %[[PATTERN:.*]] = arith.constant dense<[0, 0, 4, 4, 8, 8, 12, 12]> : vector<8xi32>
// CHECK-DAG:         %[[BASE:.*]] = vector.broadcast %{{.*}} : i32 to vector<8xi32>
// CHECK:             %[[OFFSETS:.*]] = arith.addi %[[BASE]], %[[PATTERN]]
// CHECK:             %[[KK:.*]] = arith.addi %[[K]], %[[OFFSETS]]
// CHECK:             vector.gather {{.*}} [%[[KK]]]
// CHECK-NOT:       scf.for {{.*}} -> (vector<8xf32>)
// CHECK:           scf.for {{.*}} -> (f32)
func.func @decode_nm(%w: tensor<3x32xf32, #NM>, %x: tensor<1x32xf32>) -> tensor<1x3xf32> {
  %y = smlir.linear %x, %w : tensor<1x32xf32>, tensor<3x32xf32, #NM> -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

/// Empty linears (no weight rows, no tokens) are not tiled (zero-sized
/// blocks divided by zero): left to smlir-decompose-linear.
// CHECK-LABEL: func.func @no_rows(
// CHECK-NOT:     scf.parallel
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<16x64xf32>, tensor<0x64xf32, #{{.*}}> -> tensor<16x0xf32>
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
func.func @no_rows(%w: tensor<0x64xf32, #CSR>, %x: tensor<16x64xf32>) -> tensor<16x0xf32> {
  %y = smlir.linear %x, %w : tensor<16x64xf32>, tensor<0x64xf32, #CSR> -> tensor<16x0xf32>
  return %y : tensor<16x0xf32>
}

// -----

// CHECK-LABEL: func.func @no_tokens(
// CHECK-NOT:     scf.parallel
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<0x32xf32>, tensor<4x32xf32, #{{.*}}> -> tensor<0x4xf32>
#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
func.func @no_tokens(%w: tensor<4x32xf32, #NM>, %x: tensor<0x32xf32>) -> tensor<0x4xf32> {
  %y = smlir.linear %x, %w : tensor<0x32xf32>, tensor<4x32xf32, #NM> -> tensor<0x4xf32>
  return %y : tensor<0x4xf32>
}
