// RUN: sparse-mlir-opt %s -smlir-fuse-streaming-sparsifiers -split-input-file | FileCheck %s

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

/// A linear's epilogue (bias add + GELU, one generic) with a threshold: the
/// generic writes the CSR result itself. No dense tensor lies between the
/// producer's computation and the sparse result, and no convert remains.
// CHECK-LABEL: func.func @threshold_into_epilogue(
// CHECK-SAME:      %[[Y:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NOT:     tensor.empty() : tensor<8x16xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<8x16xf32, #sparse>
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:        ins(%[[Y]], %[[B]] : tensor<8x16xf32>, tensor<16xf32>)
// CHECK-SAME:        outs(%[[E]] : tensor<8x16xf32, #sparse>) attrs = {smlir.fusion = #smlir.fusion<kind = fused, tensor = "gelu">}
// CHECK:           %[[S:.*]] = arith.addf
// CHECK:           %[[G:.*]] = math.erf %[[S]]
// CHECK:           %[[A:.*]] = math.absf %[[G]]
// CHECK:           %[[KEEP:.*]] = arith.cmpf oge, %[[A]]
// CHECK:           %[[MASK:.*]] = arith.extsi %[[KEEP]] : i1 to i32
// CHECK:           %[[BITS:.*]] = arith.bitcast %[[G]] : f32 to i32
// CHECK:           %[[AND:.*]] = arith.andi %[[BITS]], %[[MASK]] : i32
// CHECK:           %[[KEPT:.*]] = arith.bitcast %[[AND]] : i32 to f32
// CHECK:           %[[SEL:.*]] = sparse_tensor.select %[[KEPT]] : f32 {
// CHECK:             arith.cmpf une
// CHECK:             sparse_tensor.yield
// CHECK:           linalg.yield %[[SEL]] : f32
// CHECK:         } -> tensor<8x16xf32, #sparse>
// CHECK-NOT:     smlir.sparsify
// CHECK-NOT:     sparse_tensor.convert
// CHECK:         return %[[R]] : tensor<8x16xf32, #sparse>
func.func @threshold_into_epilogue(%y: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32, #CSR> {
  %init = tensor.empty() : tensor<8x16xf32>
  %g = linalg.generic {indexing_maps = [#map, #row, #map], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<8x16xf32>, tensor<16xf32>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %e = math.erf %s : f32
    linalg.yield %e : f32
  } -> tensor<8x16xf32>
  %r = smlir.sparsify %g : tensor<8x16xf32> with #smlir.threshold<0.05> as #smlir.csr {tensor_name = "gelu"} -> tensor<8x16xf32, #CSR>
  return %r : tensor<8x16xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// Random fraction: the fused body calls the keep decision (Philox of the
/// linear index and the call number; see convert-smlir-to-sparse-tensor). torch-mlir's ReLU (cmpf + select)
/// becomes bit operations, which sparsification accepts in a kernel.
// CHECK-LABEL: func.func @random_fraction_into_relu(
// CHECK-SAME:      %{{[^:]*}}: tensor<4x8xf32>, %[[CALL:[^:]*]]: i64 {smlir.call_number})
// CHECK:         %[[CALL_INDEX:.*]] = arith.index_castui %[[CALL]] : i64 to index
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>) attrs = {smlir.fusion = #smlir.fusion<kind = fused, tensor = "relu">}
// CHECK:           %[[POS:.*]] = arith.cmpf ugt
// CHECK-NOT:       arith.select
// CHECK:           %[[M:.*]] = arith.extsi %[[POS]] : i1 to i32
// CHECK:           %[[NOT:.*]] = arith.xori %[[M]], %c-1_i32 : i32
// CHECK:           arith.andi %{{.*}}, %[[M]] : i32
// CHECK:           arith.andi %{{.*}}, %[[NOT]] : i32
// CHECK:           arith.ori
// CHECK:           linalg.index 0
// CHECK:           linalg.index 1
// CHECK:           %[[KEEP:.*]] = func.call @__smlir_random_keep_7_4194304(%{{.*}}, %[[CALL_INDEX]])
// CHECK:           arith.extsi %[[KEEP]] : i1 to i32
// CHECK:           sparse_tensor.select
func.func @random_fraction_into_relu(%x: tensor<4x8xf32>, %call: i64 {smlir.call_number}) -> tensor<4x8xf32, #CSR> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.cmpf ugt, %a, %zero : f32
    %m = arith.select %c, %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.random_fraction<fraction = 0.25, seed = 7> as #smlir.csr {tensor_name = "relu"} -> tensor<4x8xf32, #CSR>
  return %r : tensor<4x8xf32, #CSR>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// Keep-all: only the select that skips exact zeros.
// CHECK-LABEL: func.func @keep_all_coo(
// CHECK:         linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32, #sparse>) attrs = {smlir.fusion = #smlir.fusion<kind = fused, tensor = "relu">}
// CHECK:           %[[M:.*]] = arith.maximumf
// CHECK-NEXT:      %[[SEL:.*]] = sparse_tensor.select %[[M]] : f32
func.func @keep_all_coo(%x: tensor<4x8xf32>) -> tensor<4x8xf32, #COO> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.keep_all as #smlir.coo {tensor_name = "relu"} -> tensor<4x8xf32, #COO>
  return %r : tensor<4x8xf32, #COO>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// The dense value has another reader: fusing would compute it twice.
// CHECK-LABEL: func.func @negative_other_reader(
// CHECK:         %[[G:.*]] = linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:         smlir.sparsify %[[G]]
// CHECK-SAME:        smlir.fusion = #smlir.fusion<kind = not_fused, reason = "the dense value has other readers">
func.func @negative_other_reader(%x: tensor<4x8xf32>) -> (tensor<4x8xf32, #CSR>, tensor<4x8xf32>) {
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.tanh %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr -> tensor<4x8xf32, #CSR>
  return %r, %r0 : tensor<4x8xf32, #CSR>, tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A contraction is not element-wise: its dense accumulator stays.
// CHECK-LABEL: func.func @negative_matmul_producer(
// CHECK:         %[[M:.*]] = linalg.matmul
// CHECK:         smlir.sparsify %[[M]]
// CHECK-SAME:        smlir.fusion = #smlir.fusion<kind = not_fused, reason = "the producer is not a linalg.generic">
func.func @negative_matmul_producer(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>) -> tensor<4x8xf32, #CSR> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%fill : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = smlir.sparsify %m : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr -> tensor<4x8xf32, #CSR>
  return %r : tensor<4x8xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// Magnitude pruning needs the whole tensor: not streaming.
// CHECK-LABEL: func.func @negative_materializing(
// CHECK:         smlir.sparsify
// CHECK-SAME:        smlir.fusion = #smlir.fusion<kind = not_fused, reason = "materializing sparsifiers need more than one element at a time">
func.func @negative_materializing(%x: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.tanh %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.scalar_fraction<0.5> as #smlir.csr -> tensor<4x8xf32, #CSR>
  return %r : tensor<4x8xf32, #CSR>
}

// -----

#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// BSR is written block by block; an element-wise loop cannot insert into it.
// CHECK-LABEL: func.func @negative_bsr(
// CHECK:         smlir.sparsify
// CHECK-SAME:        smlir.fusion = #smlir.fusion<kind = not_fused, reason = "blocked or n:m storage is written block by block">
func.func @negative_bsr(%x: tensor<4x8xf32>) -> tensor<4x8xf32, #BSR> {
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.tanh %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.bsr<block = [2, 2]> -> tensor<4x8xf32, #BSR>
  return %r : tensor<4x8xf32, #BSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#map = affine_map<(d0, d1) -> (d0, d1)>

/// A fallback reader converts the value back to dense: writing it sparsely
/// first gains nothing (and upstream would fold that convert into the
/// producer, which a select cannot survive).
// CHECK-LABEL: func.func @negative_read_densely(
// CHECK:         smlir.sparsify
// CHECK-SAME:        smlir.fusion = #smlir.fusion<kind = not_fused, reason = "a reader without a sparse lowering reads it densely (fallback)">
func.func @negative_read_densely(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %init = tensor.empty() : tensor<4x8xf32>
  %r0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.tanh %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r = smlir.sparsify %r0 : tensor<4x8xf32> with #smlir.threshold<0.5> as #smlir.csr -> tensor<4x8xf32, #CSR>
  %d = sparse_tensor.convert %r : tensor<4x8xf32, #CSR> to tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}
