// RUN: sparse-mlir-opt %s -convert-smlir-to-sparse-tensor -split-input-file -verify-diagnostics | FileCheck %s

// Streaming sparsifiers (keep_all, threshold, random_fraction) and n:m
// magnitude lower to linalg + sparse_tensor (scalar / block fraction and
// transposable n:m: materializing-sparsifiers.mlir); what has no lowering is
// reported with the reason.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// keep_all only stores the tensor: sparse_tensor.convert drops exact zeros.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @keep_all_to_csr_is_one_convert(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = sparse_tensor.convert %[[X]] : tensor<8x8xf32> to tensor<8x8xf32, #[[$CSR]]>
// CHECK-NEXT:    return %[[R]] : tensor<8x8xf32, #[[$CSR]]>
func.func @keep_all_to_csr_is_one_convert(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

/// keep_all needs no float: integer tensors are converted as well.
// CHECK-LABEL: func.func @keep_all_integer_to_csr(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xi32>)
// CHECK-NEXT:    %[[R:.*]] = sparse_tensor.convert %[[X]] : tensor<8x8xi32> to tensor<8x8xi32, #[[$CSR]]>
// CHECK-NEXT:    return %[[R]]
func.func @keep_all_integer_to_csr(%x: tensor<8x8xi32>) -> tensor<8x8xi32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xi32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xi32, #CSR>
  return %r : tensor<8x8xi32, #CSR>
}

/// keep_all into dense storage is the identity: the op folds away.
// CHECK-LABEL: func.func @keep_all_to_dense_folds_away(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    return %[[X]] : tensor<8x8xf32>
func.func @keep_all_to_dense_folds_away(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// keep_all converts into whatever encoding the result type carries.
// CHECK-DAG:   #[[$COO:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @keep_all_to_coo(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = sparse_tensor.convert %[[X]] : tensor<8x8xf32> to tensor<8x8xf32, #[[$COO]]>
// CHECK-NEXT:    return %[[R]]
func.func @keep_all_to_coo(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #COO> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.coo -> tensor<8x8xf32, #COO>
  return %r : tensor<8x8xf32, #COO>
}

// CHECK-LABEL: func.func @keep_all_to_bsr(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = sparse_tensor.convert %[[X]] : tensor<8x8xf32> to tensor<8x8xf32, #[[$BSR]]>
// CHECK-NEXT:    return %[[R]]
func.func @keep_all_to_bsr(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #BSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.bsr<block = [2, 4]> -> tensor<8x8xf32, #BSR>
  return %r : tensor<8x8xf32, #BSR>
}

/// A threshold in front of BSR storage: mask first, then convert.
// CHECK-LABEL: func.func @threshold_to_bsr(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK:         %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x8xf32>)
// CHECK:         %[[R:.*]] = sparse_tensor.convert %[[MASKED]] : tensor<8x8xf32> to tensor<8x8xf32, #[[$BSR]]>
// CHECK-NEXT:    return %[[R]]
func.func @threshold_to_bsr(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #BSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.5> as #smlir.bsr<block = [2, 4]> -> tensor<8x8xf32, #BSR>
  return %r : tensor<8x8xf32, #BSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// threshold selects |x| >= t ? x : 0 element-wise into a zero-filled dense
/// tensor, then converts it. `oge` is false for NaN, so NaN inputs are dropped.
// CHECK-DAG:   #[[$ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @threshold_to_csr(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-DAG:     %[[CUT:.*]] = arith.constant 5.000000e-02 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[EMPTY:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK:         %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<8x8xf32>)
// CHECK:         %[[MASKED:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<8x8xf32>) outs(%[[ZEROS]] : tensor<8x8xf32>) {
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:      %[[ABS:.*]] = math.absf %[[IN]] : f32
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpf oge, %[[ABS]], %[[CUT]] : f32
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[KEEP]], %[[IN]], %[[OUT]] : f32
// CHECK-NEXT:      linalg.yield %[[SEL]] : f32
// CHECK-NEXT:    } -> tensor<8x8xf32>
// CHECK-NEXT:    %[[R:.*]] = sparse_tensor.convert %[[MASKED]] : tensor<8x8xf32> to tensor<8x8xf32, #[[$CSR]]>
// CHECK-NEXT:    return %[[R]] : tensor<8x8xf32, #[[$CSR]]>
func.func @threshold_to_csr(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr {tensor_name = "w"} -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

/// Into dense storage the masked tensor is the result: no convert.
// CHECK-LABEL: func.func @threshold_to_dense_has_no_convert(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf64>)
// CHECK-DAG:     %[[CUT:.*]] = arith.constant 5.000000e-02 : f64
// CHECK:         %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x8xf64>)
// CHECK:           arith.cmpf oge, %{{.*}}, %[[CUT]] : f64
// CHECK:         } -> tensor<8x8xf64>
// CHECK-NEXT:    return %[[MASKED]] : tensor<8x8xf64>
func.func @threshold_to_dense_has_no_convert(%x: tensor<8x8xf64>) -> tensor<8x8xf64> {
  %r = smlir.sparsify %x : tensor<8x8xf64> with #smlir.threshold<0.05> as #smlir.dense -> tensor<8x8xf64>
  return %r : tensor<8x8xf64>
}

/// The threshold constant has the tensor's element type (0.25 is exact in f16).
// CHECK-LABEL: func.func @threshold_f16(
// CHECK-DAG:     %[[CUT:.*]] = arith.constant 2.500000e-01 : f16
// CHECK:         linalg.generic
// CHECK:           %[[ABS:.*]] = math.absf %{{.*}} : f16
// CHECK-NEXT:      arith.cmpf oge, %[[ABS]], %[[CUT]] : f16
// CHECK:         sparse_tensor.convert %{{.*}} : tensor<8x8xf16> to tensor<8x8xf16, #[[$CSR]]>
func.func @threshold_f16(%x: tensor<8x8xf16>) -> tensor<8x8xf16, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf16> with #smlir.threshold<0.25> as #smlir.csr -> tensor<8x8xf16, #CSR>
  return %r : tensor<8x8xf16, #CSR>
}

/// An infinite threshold becomes the element type's infinity.
// CHECK-LABEL: func.func @threshold_infinity_bf16(
// CHECK-DAG:     %[[CUT:.*]] = arith.constant 0x7F80 : bf16
// CHECK:         arith.cmpf oge, %{{.*}}, %[[CUT]] : bf16
func.func @threshold_infinity_bf16(%x: tensor<8x8xbf16>) -> tensor<8x8xbf16> {
  %r = smlir.sparsify %x : tensor<8x8xbf16> with #smlir.threshold<0x7FF0000000000000> as #smlir.dense -> tensor<8x8xbf16>
  return %r : tensor<8x8xbf16>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Dynamic dimensions of the mask are read from the source.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @threshold_dynamic_rows(
// CHECK-SAME:      %[[X:.*]]: tensor<?x8xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[D0:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x8xf32>
// CHECK:         %[[EMPTY:.*]] = tensor.empty(%[[D0]]) : tensor<?x8xf32>
// CHECK:         %[[ZEROS:.*]] = linalg.fill {{.*}} outs(%[[EMPTY]] : tensor<?x8xf32>)
// CHECK:         %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x8xf32>) outs(%[[ZEROS]] : tensor<?x8xf32>)
// CHECK:         sparse_tensor.convert %[[MASKED]] : tensor<?x8xf32> to tensor<?x8xf32, #[[$CSR]]>
func.func @threshold_dynamic_rows(%x: tensor<?x8xf32>) -> tensor<?x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<?x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<?x8xf32, #CSR>
  return %r : tensor<?x8xf32, #CSR>
}

/// Every dynamic dimension gets its own tensor.dim, in order.
// CHECK-LABEL: func.func @threshold_all_dims_dynamic(
// CHECK-SAME:      %[[X:.*]]: tensor<?x?xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[D0:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x?xf32>
// CHECK-DAG:     %[[D1:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<?x?xf32>
// CHECK:         tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?xf32>
func.func @threshold_all_dims_dynamic(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = smlir.sparsify %x : tensor<?x?xf32> with #smlir.threshold<0.05> as #smlir.dense -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#BCSR = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32 }>

/// The mask is element-wise over every dimension of a batched tensor.
// CHECK-DAG:   #[[$ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[$BCSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @threshold_batched_csr(
// CHECK:         linalg.generic {indexing_maps = [#[[$ID3]], #[[$ID3]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK:         sparse_tensor.convert %{{.*}} : tensor<2x8x8xf32> to tensor<2x8x8xf32, #[[$BCSR]]>
func.func @threshold_batched_csr(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32, #BCSR> {
  %r = smlir.sparsify %x : tensor<2x8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<2x8x8xf32, #BCSR>
  return %r : tensor<2x8x8xf32, #BCSR>
}

// -----

/// random_fraction: a counter-based Philox4x32-10 word per element, keyed by
/// the seed (3 = key words 3 and 0), the row-major linear index and the call
/// number (0 without an `smlir.call_number` argument); kept when
/// (word >> 8) >= fraction * 2^24 (0.5 * 2^24 = 8388608 = 0x4160000000000000
/// as f64). The decision is a private function per (seed, cut) that the
/// kernel calls: one opaque op to sparsification, whose lattice builder
/// would expand the ten inlined rounds exponentially. Its rounds are
/// 32x32->64-bit multiplies spelled with i64 arithmetic.
// CHECK-LABEL: func.func private @__smlir_random_keep_3_8388608(
// CHECK-SAME:      %[[LINEAR:[^:]*]]: i64, %[[CALL_INDEX:[^:]*]]: index) -> i1
// CHECK-DAG:     %[[CUT:.*]] = arith.constant 0x4160000000000000 : f64
// CHECK-DAG:     %[[M0:.*]] = arith.constant 3528531795 : i64
// CHECK-DAG:     %[[KEY0:.*]] = arith.constant 3 : i32
// CHECK:         %[[LO:.*]] = arith.trunci %[[LINEAR]] : i64 to i32
// CHECK:         %[[CALL:.*]] = arith.index_castui %[[CALL_INDEX]] : index to i64
// CHECK:         %[[CALL_LO:.*]] = arith.trunci %[[CALL]] : i64 to i32
// CHECK:         %[[LO_WIDE:.*]] = arith.extui %[[LO]] : i32 to i64
// CHECK:         arith.muli %[[LO_WIDE]], %[[M0]] : i64
// CHECK:         arith.extui %[[CALL_LO]] : i32 to i64
// CHECK:         arith.xori %{{.*}}, %[[KEY0]] : i32
// CHECK:         %[[BITS:.*]] = arith.shrui %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[U:.*]] = arith.uitofp %[[BITS]] : i32 to f64
// CHECK-NEXT:    %[[KEEP:.*]] = arith.cmpf oge, %[[U]], %[[CUT]] : f64
// CHECK-NEXT:    return %[[KEEP]] : i1
// CHECK-NOT:     arith.mului_extended
// CHECK-LABEL: func.func @random_fraction_philox(
// CHECK:         %[[ZERO_CALL:.*]] = arith.constant 0 : index
// CHECK:         linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           %[[ROW:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK:           %[[LIN:.*]] = arith.addi %[[ROW]], %[[J]] : index
// CHECK:           %[[LIN64:.*]] = arith.index_castui %[[LIN]] : index to i64
// CHECK:           %[[K:.*]] = func.call @__smlir_random_keep_3_8388608(%[[LIN64]], %[[ZERO_CALL]])
// CHECK:           arith.select %[[K]], %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     sparse_tensor.convert
func.func @random_fraction_philox(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0.5, seed = 3> as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

/// The call number (an i64 argument marked `smlir.call_number`) is the
/// Philox counter's upper half: a new mask per call.
// CHECK-LABEL: func.func @random_fraction_call_number(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x8xf32>, %[[CALL:[^:]*]]: i64 {smlir.call_number})
// CHECK:         %[[CALL_INDEX:.*]] = arith.index_castui %[[CALL]] : i64 to index
// CHECK:         linalg.generic
// CHECK:           func.call @__smlir_random_keep_3_8388608(%{{.*}}, %[[CALL_INDEX]])
func.func @random_fraction_call_number(%x: tensor<8x8xf32>, %call: i64 {smlir.call_number}) -> tensor<8x8xf32> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.random_fraction<fraction = 0.5, seed = 3> as #smlir.dense -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Scalar fraction is lowered for static shapes only (materializing-sparsifiers.mlir).
func.func @negative_scalar_fraction_dynamic_shape(%x: tensor<?x8xf32>) -> tensor<?x8xf32, #CSR> {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.scalar_fraction<0.9> (materializing) has no lowering in convert-smlir-to-sparse-tensor for 'tensor<?x8xf32>' (lowered for static shapes only); apply it to a function argument (smlir-hoist-argument-sparsifiers) so the caller runs it}}
  %r = smlir.sparsify %x : tensor<?x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<?x8xf32, #CSR>
  return %r : tensor<?x8xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// n:m magnitude (blocking): each element counts, over the m elements of its
/// group, those ranking above it (larger |x|, or equal |x| at a lower index)
/// and is kept when fewer than n do: m unrolled extracts, no sort, O(m) work.
// CHECK-LABEL: func.func @nm_magnitude_rank_count(
// CHECK:         %[[KEPT:.*]] = linalg.generic
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           %[[POS:.*]] = arith.remui %[[J]], %{{.*}} : index
// CHECK:           %[[START:.*]] = arith.subi %[[J]], %[[POS]] : index
// CHECK-COUNT-4:   tensor.extract
// CHECK:           %[[KEEP:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:      arith.select %[[KEEP]]
// CHECK:         sparse_tensor.convert %[[KEPT]] : tensor<8x8xf32> to tensor<8x8xf32, #{{.*}}>
func.func @nm_magnitude_rank_count(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// rows = 2: a position's magnitude is |x| summed over the element's row
/// pair (rows i - i mod 2 and the next), so both rows keep one pattern:
/// 2 extracts for the element itself and 2 per group position.
// CHECK-LABEL: func.func @nm_magnitude_shared_rows(
// CHECK:         %[[KEPT:.*]] = linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           %[[POS:.*]] = arith.remui %[[J]], %{{.*}} : index
// CHECK:           %[[ROW:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK:           %[[FIRST:.*]] = arith.subi %[[I]], %[[ROW]] : index
// CHECK-COUNT-10:  tensor.extract
// CHECK-NOT:       tensor.extract
// CHECK:           %[[KEEP:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:      arith.select %[[KEEP]]
// CHECK:         sparse_tensor.convert %[[KEPT]] : tensor<8x8xf32> to tensor<8x8xf32, #{{.*}}>
func.func @nm_magnitude_shared_rows(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, rows = 2> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// rows = 4 over 6 rows: the last row group (rows 4, 5) sums its own rows.
/// Rows past the end are read clamped to row 5 and add 0 instead.
// CHECK-LABEL: func.func @nm_magnitude_shared_rows_partial_last_group(
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK:         linalg.generic
// CHECK:           %[[INSIDE:.*]] = arith.cmpi ult, %{{.*}}, %[[C6]] : index
// CHECK:           %[[CLAMPED:.*]] = arith.minui
// CHECK:           tensor.extract %{{.*}}[%[[CLAMPED]], %{{.*}}]
// CHECK:           arith.select %[[INSIDE]]
func.func @nm_magnitude_shared_rows_partial_last_group(%x: tensor<6x8xf32>) -> tensor<6x8xf32, #CSR> {
  %r = smlir.sparsify %x : tensor<6x8xf32> with #smlir.nm_magnitude<n = 2, m = 4, rows = 4> as #smlir.csr -> tensor<6x8xf32, #CSR>
  return %r : tensor<6x8xf32, #CSR>
}

// -----

/// The transposable variant is lowered for f16, bf16, f32 and f64 only.
func.func @negative_transposable_nm_f8(%x: tensor<8x8xf8E4M3FN>) -> tensor<8x8xf8E4M3FN> {
  // expected-error@+1 {{'smlir.sparsify' op sparsifier #smlir.nm_magnitude<n = 2, m = 4, transposable = true> (blocking) has no lowering in convert-smlir-to-sparse-tensor for 'tensor<8x8xf8E4M3FN>' (lowered for f16, bf16, f32 and f64 only)}}
  %r = smlir.sparsify %x : tensor<8x8xf8E4M3FN> with #smlir.nm_magnitude<n = 2, m = 4, transposable = true> as #smlir.dense -> tensor<8x8xf8E4M3FN>
  return %r : tensor<8x8xf8E4M3FN>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Block fraction is lowered for a 2-d block on a matrix only; the error
/// names the tensor when tensor_name is given.
func.func @negative_block_fraction_1d_block(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'layer.weight': sparsifier #smlir.block_fraction<fraction = 0.75, block = [4]> (materializing) has no lowering in convert-smlir-to-sparse-tensor for 'tensor<8x8xf32>' (lowered for a 2-d block on a matrix only); apply it to a function argument (smlir-hoist-argument-sparsifiers) so the caller runs it}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.block_fraction<fraction = 0.75, block = [4]> as #smlir.csr {tensor_name = "layer.weight"} -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// n:m storage needs exactly n entries per group; sparse_tensor.convert drops
/// zeros, so even keep_all is not lowered into it.
func.func @negative_keep_all_to_nm(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM> {
  // expected-error@+1 {{'smlir.sparsify' op storing into #smlir.nm<n = 2, m = 4> needs every group padded to exactly n entries; sparse_tensor.convert would drop zeros and corrupt the groups (pass the tensor as a packed n:m function argument instead)}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #NM>
  return %r : tensor<8x8xf32, #NM>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[1, 8]), crdWidth = 8 }>

func.func @negative_threshold_to_nm(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM> {
  // expected-error@+1 {{'smlir.sparsify' op tensor 'w': storing into #smlir.nm<n = 1, m = 8> needs every group padded to exactly n entries; sparse_tensor.convert would drop zeros and corrupt the groups (pass the tensor as a packed n:m function argument instead)}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.5> as #smlir.nm<n = 1, m = 8> {tensor_name = "w"} -> tensor<8x8xf32, #NM>
  return %r : tensor<8x8xf32, #NM>
}

// -----

#NM = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// For an n:m target the storage problem is reported, not the sparsifier.
func.func @negative_nm_magnitude_to_nm(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #NM> {
  // expected-error@+1 {{'smlir.sparsify' op storing into #smlir.nm<n = 2, m = 4> needs every group padded to exactly n entries}}
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.nm_magnitude<n = 2, m = 4> as #smlir.nm<n = 2, m = 4> -> tensor<8x8xf32, #NM>
  return %r : tensor<8x8xf32, #NM>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#id = affine_map<(d0, d1) -> (d0, d1)>

/// keep_all of a linalg result is copied through a zero-filled output before
/// the convert: converting the producer's result directly would let upstream
/// fold the convert into the producer, which sparsification then rejects.
// CHECK-LABEL: func.func @keep_all_of_linalg_result_copies_first(
// CHECK:         %[[RELU:.*]] = linalg.generic
// CHECK:         %[[ZERO:.*]] = linalg.fill
// CHECK:         %[[COPY:.*]] = linalg.generic {{.*}} ins(%[[RELU]] : tensor<4x8xf32>) outs(%[[ZERO]] : tensor<4x8xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         sparse_tensor.convert %[[COPY]] : tensor<4x8xf32> to tensor<4x8xf32, #{{.*}}>
func.func @keep_all_of_linalg_result_copies_first(%x: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %s = smlir.sparsify %relu : tensor<4x8xf32> with #smlir.keep_all as #smlir.csr -> tensor<4x8xf32, #CSR>
  return %s : tensor<4x8xf32, #CSR>
}

// -----

/// An smlir.kernel left in place runs its loops where it stands.
// CHECK-LABEL: func.func @kernel_inlined(
// CHECK-SAME:      %[[M:.*]]: memref<8xf32>)
// CHECK-NOT:     smlir.kernel
// CHECK:         %[[V:.*]] = memref.load %[[M]]
// CHECK-NEXT:    memref.store %[[V]], %[[M]]
// CHECK-NEXT:    return
func.func @kernel_inlined(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  smlir.kernel "copy_1" {
    %v = memref.load %m[%c0] : memref<8xf32>
    memref.store %v, %m[%c0] : memref<8xf32>
  }
  return
}
