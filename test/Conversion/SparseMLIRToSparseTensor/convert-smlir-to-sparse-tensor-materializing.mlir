// RUN: sparse-mlir-opt %s -convert-smlir-to-sparse-tensor -split-input-file | FileCheck %s

// Scalar and block fraction (materializing) and transposable n:m magnitude
// (blocking) build a dense masked tensor with scf loops; the reference is
// sparse_mlir/weights.py. Unsupported cases are in
// convert-smlir-to-sparse-tensor.mlir (negative_*).

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Radix select over the collapsed tensor. The key of x is 0 for NaN (ranked
/// below every number), else bits(|x|) + 1; f32 keys have two 16-bit digits,
/// so two histogram passes, each followed by a scan of the 65536 buckets from
/// the top for the bucket of the cut. The final pass, in index order, keeps
/// keys above the cut and the first `ties` keys equal to it. 0.75 * 32 = 24
/// dropped: 8 kept.
// CHECK-LABEL: func.func @scalar_fraction_radix_select(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[KEEP:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:     %[[BUCKETS:.*]] = arith.constant 65536 : index
// CHECK-DAG:     %[[TOP:.*]] = arith.constant 65535 : i64
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : i64
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
// CHECK:         %[[OUT:.*]] = tensor.empty() : tensor<32xf32>
// First digit: every key counts.
// CHECK:         %[[H0:.*]] = linalg.fill ins(%{{.*}} : i64) outs(%{{.*}} : tensor<65536xi64>)
// CHECK:         %[[HIST0:.*]] = scf.for %[[I:.*]] = %{{.*}} to %[[C32]] {{.*}} iter_args(%[[H:.*]] = %[[H0]]) -> (tensor<65536xi64>) {
// CHECK:           %[[V:.*]] = tensor.extract %[[FLAT]][%[[I]]] : tensor<32xf32>
// CHECK:           %[[ABS:.*]] = math.absf %[[V]] : f32
// CHECK:           %[[BITS:.*]] = arith.bitcast %[[ABS]] : f32 to i32
// CHECK:           %[[WIDE:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK:           %[[PLUS1:.*]] = arith.addi %[[WIDE]], %{{.*}} : i64
// CHECK:           %[[NAN:.*]] = arith.cmpf uno, %[[V]], %[[V]] : f32
// CHECK:           %[[KEY:.*]] = arith.select %[[NAN]], %{{.*}}, %[[PLUS1]] : i64
// CHECK:           %[[HIGH:.*]] = arith.shrui %[[KEY]], %[[C16]] : i64
// CHECK:           %[[DIGIT:.*]] = arith.andi %[[HIGH]], %{{.*}} : i64
// CHECK:           %[[BUCKET:.*]] = arith.index_castui %[[DIGIT]] : i64 to index
// CHECK:           %[[OLD:.*]] = tensor.extract %[[H]][%[[BUCKET]]] : tensor<65536xi64>
// CHECK:           %[[NEW:.*]] = arith.addi %[[OLD]], %{{.*}} : i64
// CHECK:           %[[INS:.*]] = tensor.insert %[[NEW]] into %[[H]][%[[BUCKET]]] : tensor<65536xi64>
// CHECK:           scf.yield %[[INS]] : tensor<65536xi64>
// CHECK:         %[[SCAN0:.*]]:4 = scf.for %[[D:.*]] = %{{.*}} to %[[BUCKETS]] {{.*}} -> (i64, i64, i1, i64) {
// CHECK:           %[[DI:.*]] = arith.index_castui %[[D]] : index to i64
// CHECK:           arith.subi %[[TOP]], %[[DI]] : i64
// CHECK:           tensor.extract %[[HIST0]]
// CHECK:           arith.cmpi sge, %{{.*}}, %[[KEEP]] : i64
// Second digit: only keys whose first digit is the cut's.
// CHECK:         %[[HIST1:.*]] = scf.for {{.*}} -> (tensor<65536xi64>) {
// CHECK:           %[[K1:.*]] = arith.select
// CHECK:           %[[PREFIX:.*]] = arith.shrui %[[K1]], %[[C16]] : i64
// CHECK:           %[[MATCH:.*]] = arith.cmpi eq, %[[PREFIX]], %[[SCAN0]]#1 : i64
// CHECK:           arith.extui %[[MATCH]] : i1 to i64
// CHECK:         %[[SCAN1:.*]]:4 = scf.for {{.*}} to %[[BUCKETS]] {{.*}} -> (i64, i64, i1, i64) {
// CHECK:           tensor.extract %[[HIST1]]
// CHECK:           arith.cmpi sge, %{{.*}}, %[[SCAN0]]#3 : i64
// CHECK:         %[[SHIFTED:.*]] = arith.shli %[[SCAN0]]#1, %[[C16]] : i64
// CHECK:         %[[CUT:.*]] = arith.ori %[[SHIFTED]], %[[SCAN1]]#1 : i64
// CHECK:         %[[KEPT:.*]]:2 = scf.for %[[J:.*]] = %{{.*}} to %[[C32]] {{.*}} iter_args(%[[O:.*]] = %[[OUT]], %[[TIES:.*]] = %{{.*}}) -> (tensor<32xf32>, i64) {
// CHECK:           %[[K:.*]] = arith.select
// CHECK:           %[[ABOVE:.*]] = arith.cmpi ugt, %[[K]], %[[CUT]] : i64
// CHECK:           %[[ROOM:.*]] = arith.cmpi slt, %[[TIES]], %[[SCAN1]]#3 : i64
// CHECK:           %[[EQ:.*]] = arith.cmpi eq, %[[K]], %[[CUT]] : i64
// CHECK:           %[[TIE:.*]] = arith.andi %[[EQ]], %[[ROOM]] : i1
// CHECK:           %[[KEEPIT:.*]] = arith.ori %[[ABOVE]], %[[TIE]] : i1
// CHECK:           %[[V2:.*]] = tensor.extract %[[FLAT]][%[[J]]] : tensor<32xf32>
// CHECK:           %[[SEL:.*]] = arith.select %[[KEEPIT]], %[[V2]], %[[ZERO]] : f32
// CHECK:           tensor.insert %[[SEL]] into %[[O]][%[[J]]] : tensor<32xf32>
// CHECK:         %[[EXP:.*]] = tensor.expand_shape %[[KEPT]]#0 {{\[}}[0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
// CHECK:         %[[R:.*]] = sparse_tensor.convert %[[EXP]] : tensor<4x8xf32> to tensor<4x8xf32, #{{.*}}>
// CHECK:         return %[[R]]
func.func @scalar_fraction_radix_select(%x: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<4x8xf32> with #smlir.scalar_fraction<0.75> as #smlir.csr -> tensor<4x8xf32, #CSR>
  return %r : tensor<4x8xf32, #CSR>
}

// -----

/// f64 keys have four 16-bit digits: four histograms, the first digit taken
/// from bits 48..63; any rank collapses to 1-d.
// CHECK-LABEL: func.func @scalar_fraction_f64_four_digits(
// CHECK-DAG:     %[[C48:.*]] = arith.constant 48 : i64
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0, 1, 2]] : tensor<2x3x4xf64> into tensor<24xf64>
// CHECK:         scf.for
// CHECK:           arith.bitcast %{{.*}} : f64 to i64
// CHECK:           arith.shrui %{{.*}}, %[[C48]] : i64
// CHECK-COUNT-3: tensor.empty() : tensor<65536xi64>
// CHECK-NOT:     tensor.empty() : tensor<65536xi64>
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0, 1, 2]] output_shape [2, 3, 4]
func.func @scalar_fraction_f64_four_digits(%x: tensor<2x3x4xf64>) -> tensor<2x3x4xf64> {
  %r = smlir.sparsify %x : tensor<2x3x4xf64> with #smlir.scalar_fraction<0.5> as #smlir.dense -> tensor<2x3x4xf64>
  return %r : tensor<2x3x4xf64>
}

// -----

/// f16 keys fit in one digit: one histogram pass, no prefix test.
// CHECK-LABEL: func.func @scalar_fraction_f16_one_digit(
// CHECK-COUNT-1: tensor.empty() : tensor<65536xi64>
// CHECK-NOT:     tensor.empty() : tensor<65536xi64>
// CHECK:         arith.bitcast %{{.*}} : f16 to i16
// CHECK:         return
func.func @scalar_fraction_f16_one_digit(%x: tensor<16xf16>) -> tensor<16xf16> {
  %r = smlir.sparsify %x : tensor<16xf16> with #smlir.scalar_fraction<0.5> as #smlir.dense -> tensor<16xf16>
  return %r : tensor<16xf16>
}

// -----

/// Dropping nothing (floor(0.05 * 16) = 0) or everything needs no selection:
/// one pass copies or zeroes.
// CHECK-LABEL: func.func @scalar_fraction_drop_none(
// CHECK-SAME:      %[[X:.*]]: tensor<16xf32>)
// CHECK-NOT:     tensor<65536xi64>
// CHECK:         scf.for %[[I:.*]] = {{.*}} iter_args(%[[O:.*]] = %{{.*}}) -> (tensor<16xf32>) {
// CHECK-NEXT:      %[[V:.*]] = tensor.extract %[[X]][%[[I]]] : tensor<16xf32>
// CHECK-NEXT:      %[[INS:.*]] = tensor.insert %[[V]] into %[[O]][%[[I]]] : tensor<16xf32>
// CHECK-NEXT:      scf.yield %[[INS]]
func.func @scalar_fraction_drop_none(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = smlir.sparsify %x : tensor<16xf32> with #smlir.scalar_fraction<0.05> as #smlir.dense -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// CHECK-LABEL: func.func @scalar_fraction_drop_all(
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     tensor<65536xi64>
// CHECK:         scf.for %[[I:.*]] = {{.*}} iter_args(%[[O:.*]] = %{{.*}}) -> (tensor<16xf32>) {
// CHECK-NEXT:      %[[INS:.*]] = tensor.insert %[[ZERO]] into %[[O]][%[[I]]] : tensor<16xf32>
// CHECK-NEXT:      scf.yield %[[INS]]
func.func @scalar_fraction_drop_all(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = smlir.sparsify %x : tensor<16xf32> with #smlir.scalar_fraction<1.0> as #smlir.dense -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// Block fraction: the f64 L1 norm of each 2 x 4 tile (8 tiles, row-major),
/// summed from +0.0 row by row within the tile; the radix select on the
/// norms' 64-bit keys (four digits) keeps 8 - floor(0.5 * 8) = 4 tiles into
/// an i8 mask; an element-wise generic reads its tile's byte.
// CHECK-LABEL: func.func @block_fraction_tiles(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-DAG:     %[[FZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[KEEP:.*]] = arith.constant 4 : i64
// CHECK:         %[[NORMS:.*]] = scf.for %[[T:.*]] = %{{.*}} to %[[C8]] {{.*}} -> (tensor<8xf64>) {
// CHECK:           %[[NORM:.*]] = scf.for %{{.*}} = %{{.*}} to %[[C2]] {{.*}} iter_args(%[[ACC:.*]] = %[[FZERO]]) -> (f64) {
// CHECK:             scf.for %{{.*}} = %{{.*}} to %[[C4]] {{.*}} iter_args(%[[ACC2:.*]] = %[[ACC]]) -> (f64) {
// CHECK:               %[[V:.*]] = tensor.extract %[[X]][%{{.*}}, %{{.*}}] : tensor<8x8xf32>
// CHECK:               %[[ABS:.*]] = math.absf %[[V]] : f32
// CHECK:               %[[WIDE:.*]] = arith.extf %[[ABS]] : f32 to f64
// CHECK:               arith.addf %[[ACC2]], %[[WIDE]] : f64
// CHECK:           tensor.insert %[[NORM]] into %{{.*}}[%[[T]]] : tensor<8xf64>
// CHECK:         scf.for {{.*}} -> (tensor<65536xi64>) {
// CHECK:           tensor.extract %[[NORMS]]
// CHECK:           arith.bitcast %{{.*}} : f64 to i64
// CHECK:         arith.cmpi sge, %{{.*}}, %[[KEEP]] : i64
// CHECK-COUNT-3: scf.for {{.*}} -> (tensor<65536xi64>) {
// CHECK:         %[[MASK:.*]]:2 = scf.for {{.*}} -> (tensor<8xi8>, i64) {
// CHECK:           arith.cmpi ugt
// CHECK:           %[[BYTE:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK:           tensor.insert %[[BYTE]]
// CHECK:         %[[ZEROS:.*]] = linalg.fill
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x8xf32>) outs(%[[ZEROS]] : tensor<8x8xf32>) {
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[TR:.*]] = arith.divui %[[I]], %[[C2]] : index
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           %[[TC:.*]] = arith.divui %[[J]], %[[C4]] : index
// CHECK:           %[[ROW:.*]] = arith.muli %[[TR]], %[[C2]] : index
// CHECK:           %[[TILE:.*]] = arith.addi %[[ROW]], %[[TC]] : index
// CHECK:           %[[B:.*]] = tensor.extract %[[MASK]]#0[%[[TILE]]] : tensor<8xi8>
// CHECK:           %[[K:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK:           arith.select %[[K]]
// CHECK:         sparse_tensor.convert %[[OUT]] : tensor<8x8xf32> to tensor<8x8xf32, #{{.*}}>
func.func @block_fraction_tiles(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #BSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [2, 4]> as #smlir.bsr<block = [2, 4]> -> tensor<8x8xf32, #BSR>
  return %r : tensor<8x8xf32, #BSR>
}

// -----

/// f64 elements need no extension before the norm's sum.
// CHECK-LABEL: func.func @block_fraction_f64(
// CHECK:         math.absf %{{.*}} : f64
// CHECK-NOT:     arith.extf
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f64
func.func @block_fraction_f64(%x: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %r = smlir.sparsify %x : tensor<4x4xf64> with #smlir.block_fraction<fraction = 0.5, block = [2, 2]> as #smlir.dense -> tensor<4x4xf64>
  return %r : tensor<4x4xf64>
}

// -----

/// Transposable 2:4: a loop over the four 4 x 4 tiles. Per tile, each of the
/// 16 elements gets its rank (how many elements of the tile have a larger
/// key, or the same key at a lower index) and order[rank] = element; then a
/// greedy pass in that order keeps an element while its tile row and tile
/// column both hold fewer than 2, counting in two tensor<4xindex> reset per
/// tile. Scratch is per tile, never per tensor.
// CHECK-LABEL: func.func @transposable_nm_greedy_tiles(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[N:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[M:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[I0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[I1:.*]] = arith.constant 1 : index
// CHECK:         %[[OUT0:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK:         %[[ORDER0:.*]] = tensor.empty() : tensor<16xindex>
// CHECK:         %[[RC0:.*]] = tensor.empty() : tensor<4xindex>
// CHECK:         %[[CC0:.*]] = tensor.empty() : tensor<4xindex>
// CHECK:         %[[TILES:.*]]:4 = scf.for %[[T:.*]] = %[[I0]] to %[[M]] step %[[I1]] iter_args(%[[OUT:.*]] = %[[OUT0]], %[[ORD:.*]] = %[[ORDER0]], %[[RC:.*]] = %[[RC0]], %[[CC:.*]] = %[[CC0]])
// CHECK:           %[[ORDER:.*]] = scf.for %[[E:.*]] = %[[I0]] to %[[C16]] {{.*}} iter_args(%[[O2:.*]] = %[[ORD]]) -> (tensor<16xindex>) {
// CHECK:             %[[MINE:.*]] = arith.select
// CHECK:             %[[RANK:.*]] = scf.for %[[F:.*]] = %[[I0]] to %[[C16]] {{.*}} iter_args(%[[CNT:.*]] = %[[I0]]) -> (index) {
// CHECK:               %[[THEIRS:.*]] = arith.select
// CHECK:               %[[GT:.*]] = arith.cmpi ugt, %[[THEIRS]], %[[MINE]] : i64
// CHECK:               %[[LOWER:.*]] = arith.cmpi ult, %[[F]], %[[E]] : index
// CHECK:               %[[EQ:.*]] = arith.cmpi eq, %[[THEIRS]], %[[MINE]] : i64
// CHECK:               %[[TIED:.*]] = arith.andi %[[EQ]], %[[LOWER]] : i1
// CHECK:               %[[BEFORE:.*]] = arith.ori %[[GT]], %[[TIED]] : i1
// CHECK:               %[[INC:.*]] = arith.addi %[[CNT]], %[[I1]] : index
// CHECK:               arith.select %[[BEFORE]], %[[INC]], %[[CNT]] : index
// CHECK:             tensor.insert %[[E]] into %[[O2]][%[[RANK]]] : tensor<16xindex>
// CHECK:           %[[RC1:.*]] = linalg.fill ins(%[[I0]] : index) outs(%[[RC]] : tensor<4xindex>)
// CHECK:           %[[CC1:.*]] = linalg.fill ins(%[[I0]] : index) outs(%[[CC]] : tensor<4xindex>)
// CHECK:           %[[GREEDY:.*]]:3 = scf.for %[[S:.*]] = %[[I0]] to %[[C16]] {{.*}} iter_args(%[[O3:.*]] = %[[OUT]], %[[RC2:.*]] = %[[RC1]], %[[CC2:.*]] = %[[CC1]])
// CHECK:             %[[EL:.*]] = tensor.extract %[[ORDER]][%[[S]]] : tensor<16xindex>
// CHECK:             %[[R:.*]] = arith.divui %[[EL]], %[[M]] : index
// CHECK:             %[[C:.*]] = arith.remui %[[EL]], %[[M]] : index
// CHECK-DAG:         %[[INROW:.*]] = tensor.extract %[[RC2]][%[[R]]] : tensor<4xindex>
// CHECK-DAG:         %[[INCOL:.*]] = tensor.extract %[[CC2]][%[[C]]] : tensor<4xindex>
// CHECK-DAG:         %[[ROWOK:.*]] = arith.cmpi ult, %[[INROW]], %[[N]] : index
// CHECK-DAG:         %[[COLOK:.*]] = arith.cmpi ult, %[[INCOL]], %[[N]] : index
// CHECK:             %[[OK:.*]] = arith.andi %[[ROWOK]], %[[COLOK]] : i1
// CHECK:             %[[V:.*]] = tensor.extract %[[X]]
// CHECK:             %[[SEL:.*]] = arith.select %[[OK]], %[[V]], %[[ZERO]] : f32
// CHECK:             tensor.insert %[[SEL]] into %[[O3]]
// CHECK:             %[[ADD:.*]] = arith.select %[[OK]], %[[I1]], %[[I0]] : index
// CHECK:             arith.addi %[[INROW]], %[[ADD]] : index
// CHECK:             arith.addi %[[INCOL]], %[[ADD]] : index
// CHECK:           scf.yield %[[GREEDY]]#0, %[[ORDER]], %[[GREEDY]]#1, %[[GREEDY]]#2
// CHECK:         return %[[TILES]]#0 : tensor<8x8xf32>
func.func @transposable_nm_greedy_tiles(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
