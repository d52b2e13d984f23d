// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// Every smlir attribute in every parameter form survives parse -> print ->
// parse, prints in its canonical (defaults elided) form, and is paired with
// the sparse_tensor encoding the verifier requires for it.

/// #smlir.dense carries no sparse_tensor encoding: the result is a plain tensor.
// CHECK-LABEL: func.func @dense_keeps_plain_tensor(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK:         %[[R:.*]] = smlir.sparsify %[[X]] : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf32>{{$}}
// CHECK:         return %[[R]] : tensor<8x8xf32>
func.func @dense_keeps_plain_tensor(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// CSR with its default 32-bit widths prints without parameters.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @csr_default_widths(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK:         smlir.sparsify %[[X]] : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf32, #[[$CSR]]>
func.func @csr_default_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

/// Spelling the default widths out is the same attribute: they are elided.
// CHECK-LABEL: func.func @csr_explicit_default_widths_elided(
// CHECK:         smlir.sparsify %{{.*}} with #smlir.keep_all as #smlir.csr -> tensor<8x8xf32, #[[$CSR]]>
func.func @csr_explicit_default_widths_elided(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 32, crdWidth = 32> -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

// -----

#CSR0_8 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), crdWidth = 8 }>
#CSR16_64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 16, crdWidth = 64 }>
#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>

/// Width 0 means `index`: the sparse_tensor encoding elides it.
// CHECK-DAG:   #[[$CSR0_8:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), crdWidth = 8 }>
// CHECK-DAG:   #[[$CSR16_64:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 16, crdWidth = 64 }>
// CHECK-DAG:   #[[$CSR64:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32 }>
// CHECK-LABEL: func.func @csr_index_and_8_bit_widths(
// CHECK:         as #smlir.csr<posWidth = 0, crdWidth = 8> -> tensor<8x8xf32, #[[$CSR0_8]]>
func.func @csr_index_and_8_bit_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR0_8> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 0, crdWidth = 8> -> tensor<8x8xf32, #CSR0_8>
  return %r : tensor<8x8xf32, #CSR0_8>
}

// CHECK-LABEL: func.func @csr_16_and_64_bit_widths(
// CHECK:         as #smlir.csr<posWidth = 16, crdWidth = 64> -> tensor<8x8xf32, #[[$CSR16_64]]>
func.func @csr_16_and_64_bit_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR16_64> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 16, crdWidth = 64> -> tensor<8x8xf32, #CSR16_64>
  return %r : tensor<8x8xf32, #CSR16_64>
}

/// Only the non-default width is printed.
// CHECK-LABEL: func.func @csr_one_width_given(
// CHECK:         as #smlir.csr<posWidth = 64> -> tensor<8x8xf32, #[[$CSR64]]>
func.func @csr_one_width_given(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR64> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr<posWidth = 64> -> tensor<8x8xf32, #CSR64>
  return %r : tensor<8x8xf32, #CSR64>
}

// -----

#BCSR = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32 }>

/// Rank-3 CSR is a batch of CSR matrices: every leading dimension is dense.
// CHECK-DAG:   #[[$BCSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @csr_batched_rank_3(
// CHECK:         as #smlir.csr -> tensor<4x8x8xf32, #[[$BCSR]]>
func.func @csr_batched_rank_3(%x: tensor<4x8x8xf32>) -> tensor<4x8x8xf32, #BCSR> {
  %r = smlir.sparsify %x : tensor<4x8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<4x8x8xf32, #BCSR>
  return %r : tensor<4x8x8xf32, #BCSR>
}

// -----

#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>
#CSC8_16 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 8, crdWidth = 16 }>
#BCSC = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d2 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// CSC swaps the last two dimensions: columns are the dense outer level.
// CHECK-DAG:   #[[$CSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$CSC8_16:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 8, crdWidth = 16 }>
// CHECK-DAG:   #[[$BCSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d2 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @csc_default_widths(
// CHECK:         as #smlir.csc -> tensor<8x8xf32, #[[$CSC]]>
func.func @csc_default_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSC> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csc -> tensor<8x8xf32, #CSC>
  return %r : tensor<8x8xf32, #CSC>
}

// CHECK-LABEL: func.func @csc_explicit_widths(
// CHECK:         as #smlir.csc<posWidth = 8, crdWidth = 16> -> tensor<8x8xf32, #[[$CSC8_16]]>
func.func @csc_explicit_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSC8_16> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csc<posWidth = 8, crdWidth = 16> -> tensor<8x8xf32, #CSC8_16>
  return %r : tensor<8x8xf32, #CSC8_16>
}

/// Batched CSC only swaps the two innermost dimensions.
// CHECK-LABEL: func.func @csc_batched_rank_3(
// CHECK:         as #smlir.csc -> tensor<2x8x8xf32, #[[$BCSC]]>
func.func @csc_batched_rank_3(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32, #BCSC> {
  %r = smlir.sparsify %x : tensor<2x8x8xf32> with #smlir.keep_all as #smlir.csc -> tensor<2x8x8xf32, #BCSC>
  return %r : tensor<2x8x8xf32, #BCSC>
}

// -----

#COO1 = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed), posWidth = 32, crdWidth = 32 }>
#COO2 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#COO3 = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique, soa), d2 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#COO64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 64 }>

/// A rank-1 COO tensor is a plain compressed vector (unique coordinates).
// CHECK-DAG:   #[[$COO1:.*]] = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$COO2:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$COO3:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique, soa), d2 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$COO64:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 64 }>
// CHECK-LABEL: func.func @coo_rank_1(
// CHECK:         as #smlir.coo -> tensor<16xf32, #[[$COO1]]>
func.func @coo_rank_1(%x: tensor<16xf32>) -> tensor<16xf32, #COO1> {
  %r = smlir.sparsify %x : tensor<16xf32> with #smlir.keep_all as #smlir.coo -> tensor<16xf32, #COO1>
  return %r : tensor<16xf32, #COO1>
}

/// Rank 2: nonunique compressed rows, then a singleton (structure of arrays).
// CHECK-LABEL: func.func @coo_rank_2(
// CHECK:         as #smlir.coo -> tensor<8x8xf32, #[[$COO2]]>
func.func @coo_rank_2(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #COO2> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.coo -> tensor<8x8xf32, #COO2>
  return %r : tensor<8x8xf32, #COO2>
}

/// Rank 3: the middle singleton level is nonunique, only the last is unique.
// CHECK-LABEL: func.func @coo_rank_3(
// CHECK:         as #smlir.coo -> tensor<2x8x8xf32, #[[$COO3]]>
func.func @coo_rank_3(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32, #COO3> {
  %r = smlir.sparsify %x : tensor<2x8x8xf32> with #smlir.keep_all as #smlir.coo -> tensor<2x8x8xf32, #COO3>
  return %r : tensor<2x8x8xf32, #COO3>
}

// CHECK-LABEL: func.func @coo_explicit_widths(
// CHECK:         as #smlir.coo<posWidth = 64, crdWidth = 0> -> tensor<8x8xf32, #[[$COO64]]>
func.func @coo_explicit_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #COO64> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.coo<posWidth = 64, crdWidth = 0> -> tensor<8x8xf32, #COO64>
  return %r : tensor<8x8xf32, #COO64>
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>
#BSR_W = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 2 : compressed, d0 mod 4 : dense, d1 mod 2 : dense), posWidth = 64, crdWidth = 16 }>

/// BSR tiles the matrix: block rows dense, block columns compressed, blocks dense.
// CHECK-DAG:   #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$BSR_W:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 2 : compressed, d0 mod 4 : dense, d1 mod 2 : dense), posWidth = 64, crdWidth = 16 }>
// CHECK-LABEL: func.func @bsr_default_widths(
// CHECK:         as #smlir.bsr<block = [2, 4]> -> tensor<8x8xf32, #[[$BSR]]>
func.func @bsr_default_widths(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #BSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 4]> -> tensor<8x8xf32, #BSR>
  return %r : tensor<8x8xf32, #BSR>
}

/// A dynamic dimension is not checked against the block.
// CHECK-LABEL: func.func @bsr_explicit_widths_dynamic_rows(
// CHECK:         as #smlir.bsr<block = [4, 2], posWidth = 64, crdWidth = 16> -> tensor<?x8xf32, #[[$BSR_W]]>
func.func @bsr_explicit_widths_dynamic_rows(%x: tensor<?x8xf32>) -> tensor<?x8xf32, #BSR_W> {
  %r = smlir.sparsify %x : tensor<?x8xf32> with #smlir.keep_all as #smlir.bsr<block = [4, 2], posWidth = 64, crdWidth = 16> -> tensor<?x8xf32, #BSR_W>
  return %r : tensor<?x8xf32, #BSR_W>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
#NM14 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[1, 4]), crdWidth = 8 }>
#NM28 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[2, 8]), crdWidth = 8 }>
#NM110 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 10 : dense, d1 mod 10 : structured[1, 10]), crdWidth = 8 }>

/// n:m groups the last dimension by m; coordinates default to 8 bits and
/// positions are not stored (no posWidth).
// CHECK-DAG:   #[[$NM24:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
// CHECK-DAG:   #[[$NM14:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[1, 4]), crdWidth = 8 }>
// CHECK-DAG:   #[[$NM28:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[2, 8]), crdWidth = 8 }>
// CHECK-DAG:   #[[$NM110:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 10 : dense, d1 mod 10 : structured[1, 10]), crdWidth = 8 }>
// CHECK-LABEL: func.func @nm_2_4(
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #[[$NM24]]>
func.func @nm_2_4(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM24> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #NM24>
  return %r : tensor<8x8xf32, #NM24>
}

/// crdWidth = 8 is the default for n:m and is elided.
// CHECK-LABEL: func.func @nm_explicit_default_crd_width_elided(
// CHECK:         as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #[[$NM24]]>
func.func @nm_explicit_default_crd_width_elided(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM24> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4, crdWidth = 8> -> tensor<8x8xf32, #NM24>
  return %r : tensor<8x8xf32, #NM24>
}

/// rows = 4 (one pattern per 4 rows) keeps the storage: the same
/// sparse_tensor encoding; rows = 1 is the default and is elided.
// CHECK-LABEL: func.func @nm_shared_rows(
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4, rows = 4> as #smlir.nm<n = 2, m = 4, rows = 4> -> tensor<8x8xf32, #[[$NM24]]>
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #[[$NM24]]>
func.func @nm_shared_rows(%x: tensor<8x8xf32>) -> (tensor<8x8xf32, #NM24>, tensor<8x8xf32, #NM24>) {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, rows = 4> as #smlir.nm<n = 2, m = 4, rows = 4> -> tensor<8x8xf32, #NM24>
  %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, rows = 1> as #smlir.nm<rows = 1, n = 2, m = 4> -> tensor<8x8xf32, #NM24>
  return %r, %s : tensor<8x8xf32, #NM24>, tensor<8x8xf32, #NM24>
}

/// rows = 4 need not divide the rows (6 here): the last group holds the
/// 2 rows left; the storage is the same (every row keeps its coordinates).
// CHECK-LABEL: func.func @nm_shared_rows_partial_last_group(
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4, rows = 4> as #smlir.nm<n = 2, m = 4, rows = 4> -> tensor<6x8xf32, #[[$NM24]]>
func.func @nm_shared_rows_partial_last_group(%x: tensor<6x8xf32>) -> tensor<6x8xf32, #NM24> {
  %r = smlir.sparsify %x : tensor<6x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, rows = 4> as #smlir.nm<n = 2, m = 4, rows = 4> -> tensor<6x8xf32, #NM24>
  return %r : tensor<6x8xf32, #NM24>
}

// CHECK-LABEL: func.func @nm_1_4(
// CHECK:         as #smlir.nm<n = 1, m = 4> -> tensor<8x8xf32, #[[$NM14]]>
func.func @nm_1_4(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM14> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 1, m = 4> -> tensor<8x8xf32, #NM14>
  return %r : tensor<8x8xf32, #NM14>
}

// CHECK-LABEL: func.func @nm_2_8(
// CHECK:         as #smlir.nm<n = 2, m = 8> -> tensor<8x16xf32, #[[$NM28]]>
func.func @nm_2_8(%x: tensor<8x16xf32>) -> tensor<8x16xf32, #NM28> {
  %r = smlir.sparsify %x : tensor<8x16xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 8> -> tensor<8x16xf32, #NM28>
  return %r : tensor<8x16xf32, #NM28>
}

/// m need not be a power of two, only divide the last dimension (20 = 2 * 10).
// CHECK-LABEL: func.func @nm_1_10_divisible_shape(
// CHECK:         as #smlir.nm<n = 1, m = 10> -> tensor<8x20xf32, #[[$NM110]]>
func.func @nm_1_10_divisible_shape(%x: tensor<8x20xf32>) -> tensor<8x20xf32, #NM110> {
  %r = smlir.sparsify %x : tensor<8x20xf32> with #smlir.keep_all as #smlir.nm<n = 1, m = 10> -> tensor<8x20xf32, #NM110>
  return %r : tensor<8x20xf32, #NM110>
}

// -----

#NM3 = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 floordiv 4 : dense, d2 mod 4 : structured[1, 4]), crdWidth = 16 }>
#NM1 = #sparse_tensor.encoding<{ map = (d0) -> (d0 floordiv 4 : dense, d0 mod 4 : structured[2, 4]), crdWidth = 8 }>
#NMDYN = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Rank 3 keeps every leading dimension dense; crdWidth is not the default.
// CHECK-DAG:   #[[$NM3:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 floordiv 4 : dense, d2 mod 4 : structured[1, 4]), crdWidth = 16 }>
// CHECK-DAG:   #[[$NM1:.*]] = #sparse_tensor.encoding<{ map = (d0) -> (d0 floordiv 4 : dense, d0 mod 4 : structured[2, 4]), crdWidth = 8 }>
// CHECK-DAG:   #[[$NMDYN:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>
// CHECK-LABEL: func.func @nm_rank_3_explicit_crd_width(
// CHECK:         as #smlir.nm<n = 1, m = 4, crdWidth = 16> -> tensor<2x8x8xf32, #[[$NM3]]>
func.func @nm_rank_3_explicit_crd_width(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32, #NM3> {
  %r = smlir.sparsify %x : tensor<2x8x8xf32> with #smlir.keep_all as #smlir.nm<n = 1, m = 4, crdWidth = 16> -> tensor<2x8x8xf32, #NM3>
  return %r : tensor<2x8x8xf32, #NM3>
}

/// The smallest rank n:m accepts.
// CHECK-LABEL: func.func @nm_rank_1(
// CHECK:         as #smlir.nm<n = 2, m = 4> -> tensor<16xf32, #[[$NM1]]>
func.func @nm_rank_1(%x: tensor<16xf32>) -> tensor<16xf32, #NM1> {
  %r = smlir.sparsify %x : tensor<16xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4> -> tensor<16xf32, #NM1>
  return %r : tensor<16xf32, #NM1>
}

/// A dynamic last dimension is not checked against m.
// CHECK-LABEL: func.func @nm_dynamic_last_dim(
// CHECK:         as #smlir.nm<n = 2, m = 4> -> tensor<8x?xf32, #[[$NMDYN]]>
func.func @nm_dynamic_last_dim(%x: tensor<8x?xf32>) -> tensor<8x?xf32, #NMDYN> {
  %r = smlir.sparsify %x : tensor<8x?xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4> -> tensor<8x?xf32, #NMDYN>
  return %r : tensor<8x?xf32, #NMDYN>
}

// -----

/// Threshold values print in their shortest round-trip decimal form, always
/// with a `.` so they lex as floats again.
// CHECK-LABEL: func.func @threshold_values(
// CHECK:         with #smlir.threshold<0.05> as
// CHECK:         with #smlir.threshold<0.0> as
// CHECK:         with #smlir.threshold<1.0e-10> as
// CHECK:         with #smlir.threshold<3.5e+20> as
// CHECK:         with #smlir.threshold<123456789.0> as
func.func @threshold_values(%x: tensor<8x8xf32>) {
  %0 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense -> tensor<8x8xf32>
  %1 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.0> as #smlir.dense -> tensor<8x8xf32>
  %2 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<1.0e-10> as #smlir.dense -> tensor<8x8xf32>
  %3 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<3.5e+20> as #smlir.dense -> tensor<8x8xf32>
  %4 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<123456789.0> as #smlir.dense -> tensor<8x8xf32>
  return
}

/// Infinity has no decimal spelling: it is parsed and printed as its bits.
// CHECK-LABEL: func.func @threshold_hex_infinity(
// CHECK:         with #smlir.threshold<0x7FF0000000000000> as #smlir.dense
func.func @threshold_hex_infinity(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0x7FF0000000000000> as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

/// A finite value given as bits prints as a decimal (0x3FE0000000000000 = 0.5).
// CHECK-LABEL: func.func @threshold_hex_finite_prints_decimal(
// CHECK:         with #smlir.threshold<0.5> as #smlir.dense
func.func @threshold_hex_finite_prints_decimal(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0x3FE0000000000000> as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

/// The seed defaults to 0 and is then elided.
// CHECK-LABEL: func.func @random_fraction_seeds(
// CHECK:         with #smlir.random_fraction<fraction = 0.1> as
// CHECK:         with #smlir.random_fraction<fraction = 0.1> as
// CHECK:         with #smlir.random_fraction<fraction = 0.25, seed = 42> as
// CHECK:         with #smlir.random_fraction<fraction = 1.0, seed = 18446744073709551615> as
func.func @random_fraction_seeds(%x: tensor<8x8xf32>) {
  %0 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0.1> as #smlir.dense -> tensor<8x8xf32>
  %1 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0.1, seed = 0> as #smlir.dense -> tensor<8x8xf32>
  %2 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0.25, seed = 42> as #smlir.dense -> tensor<8x8xf32>
  %3 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 1.0, seed = 18446744073709551615> as #smlir.dense -> tensor<8x8xf32>
  return
}

/// The fraction bounds 0 and 1 are both allowed.
// CHECK-LABEL: func.func @scalar_fraction_bounds(
// CHECK:         with #smlir.scalar_fraction<0.9> as
// CHECK:         with #smlir.scalar_fraction<0.0> as
// CHECK:         with #smlir.scalar_fraction<1.0> as
func.func @scalar_fraction_bounds(%x: tensor<8x8xf32>) {
  %0 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.dense -> tensor<8x8xf32>
  %1 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<0.0> as #smlir.dense -> tensor<8x8xf32>
  %2 = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<1.0> as #smlir.dense -> tensor<8x8xf32>
  return
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 4 : compressed, d0 mod 4 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// block_fraction pairs with a BSR encoding of the same block.
// CHECK-LABEL: func.func @block_fraction_with_bsr(
// CHECK:         with #smlir.block_fraction<fraction = 0.75, block = [4, 4]> as #smlir.bsr<block = [4, 4]>
func.func @block_fraction_with_bsr(%x: tensor<16x16xf32>) -> tensor<16x16xf32, #BSR> {
  %r = smlir.sparsify %x : tensor<16x16xf32> with #smlir.block_fraction<fraction = 0.75, block = [4, 4]> as #smlir.bsr<block = [4, 4]> -> tensor<16x16xf32, #BSR>
  return %r : tensor<16x16xf32, #BSR>
}

/// The block covers the trailing dimensions only; dynamic ones are not checked.
// CHECK-LABEL: func.func @block_fraction_trailing_and_dynamic_dims(
// CHECK:         with #smlir.block_fraction<fraction = 0.5, block = [4]> as #smlir.dense
// CHECK:         with #smlir.block_fraction<fraction = 0.5, block = [3, 4]> as #smlir.dense
func.func @block_fraction_trailing_and_dynamic_dims(%x: tensor<3x8xf32>, %y: tensor<5x?x8xf32>) {
  %0 = smlir.sparsify %x : tensor<3x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [4]> as #smlir.dense -> tensor<3x8xf32>
  %1 = smlir.sparsify %y : tensor<5x?x8xf32> with #smlir.block_fraction<fraction = 0.5, block = [3, 4]> as #smlir.dense -> tensor<5x?x8xf32>
  return
}

// -----

/// dim = -1 and transposable = false are the defaults and are elided;
/// dim = 0 and negative dims other than -1 are kept.
// CHECK-LABEL: func.func @nm_magnitude_forms(
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4> as
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4> as
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4, dim = 0> as
// CHECK:         with #smlir.nm_magnitude<n = 1, m = 8, dim = -2> as
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as
// CHECK:         with #smlir.nm_magnitude<n = 2, m = 4, dim = 0, transposable = true> as
func.func @nm_magnitude_forms(%x: tensor<8x16xf32>) {
  %0 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.dense -> tensor<8x16xf32>
  %1 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = -1, transposable = false> as #smlir.dense -> tensor<8x16xf32>
  %2 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = 0> as #smlir.dense -> tensor<8x16xf32>
  %3 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 1, m = 8, dim = -2> as #smlir.dense -> tensor<8x16xf32>
  %4 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as #smlir.dense -> tensor<8x16xf32>
  %5 = smlir.sparsify %x : tensor<8x16xf32> with #smlir.nm_magnitude<n = 2, m = 4, dim = 0, transposable = true> as #smlir.dense -> tensor<8x16xf32>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Dynamic dimensions are kept in both source and result.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @dynamic_shape_csr(
// CHECK-SAME:      %[[X:.*]]: tensor<?x8xf32>)
// CHECK:         smlir.sparsify %[[X]] : tensor<?x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<?x8xf32, #[[$CSR]]>
func.func @dynamic_shape_csr(%x: tensor<?x8xf32>) -> tensor<?x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<?x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<?x8xf32, #CSR>
  return %r : tensor<?x8xf32, #CSR>
}

/// Magnitude sparsifiers accept every floating-point element type.
// CHECK-LABEL: func.func @float_element_types(
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xf16> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf16, #[[$CSR]]>
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xbf16> with #smlir.scalar_fraction<0.5> as #smlir.csr -> tensor<8x8xbf16, #[[$CSR]]>
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xf64> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.csr -> tensor<8x8xf64, #[[$CSR]]>
func.func @float_element_types(%a: tensor<8x8xf16>, %b: tensor<8x8xbf16>, %c: tensor<8x8xf64>) {
  %0 = smlir.sparsify %a : tensor<8x8xf16> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf16, #CSR>
  %1 = smlir.sparsify %b : tensor<8x8xbf16> with #smlir.scalar_fraction<0.5> as #smlir.csr -> tensor<8x8xbf16, #CSR>
  %2 = smlir.sparsify %c : tensor<8x8xf64> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.csr -> tensor<8x8xf64, #CSR>
  return
}

/// Sparsifiers that do not compare magnitudes accept integer tensors.
// CHECK-LABEL: func.func @integer_tensor_without_ordering(
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xi32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xi32, #[[$CSR]]>
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xi32> with #smlir.random_fraction<fraction = 0.5, seed = 7> as #smlir.csr -> tensor<8x8xi32, #[[$CSR]]>
func.func @integer_tensor_without_ordering(%x: tensor<8x8xi32>) {
  %0 = smlir.sparsify %x : tensor<8x8xi32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xi32, #CSR>
  %1 = smlir.sparsify %x : tensor<8x8xi32> with #smlir.random_fraction<fraction = 0.5, seed = 7> as #smlir.csr -> tensor<8x8xi32, #CSR>
  return
}

// -----

/// tensor_name is printed in the attribute dictionary after the encoding.
// CHECK-LABEL: func.func @tensor_name(
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense {tensor_name = "linear1.weight"} -> tensor<8x8xf32>
func.func @tensor_name(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense {tensor_name = "linear1.weight"} -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

/// The generic form parses into the custom form (properties named
/// sparsifier, encoding and tensor_name).
// CHECK-LABEL: func.func @generic_form(
// CHECK:         smlir.sparsify %{{.*}} : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense {tensor_name = "w"} -> tensor<8x8xf32>
func.func @generic_form(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = "smlir.sparsify"(%x) <{sparsifier = #smlir.keep_all, encoding = #smlir.dense, tensor_name = "w"}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

/// The decisions passes record: #smlir.storage and #smlir.fusion, defaults elided.
// CHECK-LABEL: func.func @decisions(
// CHECK-SAME:      tensor<8x8xf32> {smlir.storage = #smlir.storage<dense, reason = "read by 'linalg.generic' (no sparse lowering for csr)">}
// CHECK-SAME:      tensor<8x8xf32> {smlir.storage = #smlir.storage<sparse>}
// CHECK:         smlir.sparsify {{.*}} {smlir.fusion = #smlir.fusion<kind = not_fused, reason = "its producer has other readers">, tensor_name = "a"}
// CHECK:         arith.addf {{.*}} {smlir.fusion = #smlir.fusion<kind = fused, tensor = "b">}
func.func @decisions(%w: tensor<8x8xf32> {smlir.storage = #smlir.storage<dense, reason = "read by 'linalg.generic' (no sparse lowering for csr)">},
                     %v: tensor<8x8xf32> {smlir.storage = #smlir.storage<sparse, reason = "">}) -> tensor<8x8xf32> {
  %r = smlir.sparsify %w : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense {smlir.fusion = #smlir.fusion<kind = not_fused, reason = "its producer has other readers">, tensor_name = "a"} -> tensor<8x8xf32>
  %s = arith.addf %r, %v {smlir.fusion = #smlir.fusion<kind = fused, tensor = "b">} : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

/// What convert-smlir-to-nvgpu leaves on the device arguments of a 2:4
/// weight: #smlir.device_buffer (every case) and, on scratch buffers,
/// #smlir.kernel_operand (every case).
// CHECK-LABEL: func.func @device_arguments(
// CHECK-SAME:      memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.tensor_name = "fc.weight"}
// CHECK-SAME:      memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 16 : i64, smlir.tensor_name = "fc.weight"}
// CHECK-SAME:      memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>, smlir.tensor_name = "fc.weight"}
// CHECK-SAME:      memref<64x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>, smlir.tensor_name = "fc.weight"}
// CHECK-SAME:      memref<64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<bias>, smlir.tensor_name = "fc.weight"}
func.func @device_arguments(
    %v: memref<4x512xf16> {smlir.device = #smlir.device_buffer<nm24_values>, smlir.tensor_name = "fc.weight"},
    %m: memref<4x32xi32> {smlir.device = #smlir.device_buffer<nm24_metadata>, smlir.mma_k = 16 : i64, smlir.tensor_name = "fc.weight"},
    %dx: memref<64x64xf16> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<x>, smlir.tensor_name = "fc.weight"},
    %dy: memref<64x64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<y>, smlir.tensor_name = "fc.weight"},
    %db: memref<64xf32> {smlir.device = #smlir.device_buffer<scratch>, smlir.kernel_operand = #smlir.kernel_operand<bias>, smlir.tensor_name = "fc.weight"}) {
  return
}

/// The attributes are ordinary attributes too: usable outside an argument's
/// dictionary (as an op's discardable attribute here).
// CHECK-LABEL: func.func @device_attrs_elsewhere(
// CHECK:         arith.constant {a = #smlir.device_buffer<scratch>, b = #smlir.kernel_operand<bias>} 0 : index
func.func @device_attrs_elsewhere() -> index {
  %c0 = arith.constant {a = #smlir.device_buffer<scratch>, b = #smlir.kernel_operand<bias>} 0 : index
  return %c0 : index
}
