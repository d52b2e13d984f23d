// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline)' | FileCheck %s
// RUN: sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-sparse-cpu-pipeline)' | FileCheck %s --check-prefix=LEFTOVER

// smlir + linalg + sparse_tensor go all the way to the LLVM dialect. Public
// functions with sparse arguments or results are wrapped by the sparse
// assembler (their body moves to @_internal_<name>), so their sparse tensors
// cross the boundary as positions / coordinates / values buffers.

/// Buffers come from the runtime's allocation cache (generic allocation
/// functions), never from malloc/free directly.
// CHECK-DAG:   llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)
// CHECK-DAG:   llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// LEFTOVER-NOT: @malloc
// LEFTOVER-NOT: @free

/// Nothing of the input dialects is left.
// LEFTOVER-NOT: smlir.
// LEFTOVER-NOT: sparse_tensor.
// LEFTOVER-NOT: linalg.
// LEFTOVER-NOT: tensor.
// LEFTOVER-NOT: bufferization.
// LEFTOVER-NOT: memref.
// LEFTOVER-NOT: scf.
// LEFTOVER-NOT: arith.
// LEFTOVER-NOT: math.
// LEFTOVER-NOT: func.func
// LEFTOVER-NOT: unrealized_conversion_cast

/// The pruned 16x8 weight of @linear_pruned_weight is never built in the
/// module (no CSR insertion for it): the caller passes it already sparse.
// LEFTOVER-NOT: @_insert_dense_compressed_16_8_

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A sparse result is returned as three 1-d buffers: positions, coordinates
/// and values.
// CHECK-LABEL: llvm.func @threshold_to_csr(
// CHECK-SAME:      -> !llvm.struct<(struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>)> attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @_internal_threshold_to_csr(
// CHECK-LABEL: llvm.func @_mlir_ciface_threshold_to_csr(
// CHECK:         llvm.call @threshold_to_csr(
func.func @threshold_to_csr(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> attributes { llvm.emit_c_interface } {
  %r = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr {tensor_name = "w"} -> tensor<8x8xf32, #CSR>
  return %r : tensor<8x8xf32, #CSR>
}

/// A CSR argument arrives as three 1-d memrefs (pointer, pointer, offset,
/// size, stride each), before the 2-d dense operand.
// CHECK-LABEL: llvm.func @csr_arg_matmul(
// CHECK-SAME:      {{(%arg[0-9]+: !llvm.ptr, %arg[0-9]+: !llvm.ptr, %arg[0-9]+: i64, %arg[0-9]+: i64, %arg[0-9]+: i64, ){3}%}}arg15: !llvm.ptr, %arg16: !llvm.ptr, %arg17: i64, %arg18: i64, %arg19: i64, %arg20: i64, %arg21: i64)
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @_internal_csr_arg_matmul(
// CHECK-LABEL: llvm.func @_mlir_ciface_csr_arg_matmul(
func.func @csr_arg_matmul(%w: tensor<8x8xf32, #CSR>, %x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes { llvm.emit_c_interface } {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x4xf32>) -> tensor<8x4xf32>
  %y = linalg.matmul ins(%w, %x : tensor<8x8xf32, #CSR>, tensor<8x4xf32>) outs(%acc : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

/// F.linear with a weight pruned to 90% by the caller: the scalar_fraction
/// sparsifier is hoisted out of the function (it has no in-function lowering),
/// so the weight arrives as CSR buffers, three 1-d memrefs after the 2-d x.
/// The C interface passes x, the three buffers and the result by pointer.
// CHECK-LABEL: llvm.func @linear_pruned_weight(
// CHECK-SAME:      %arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64, %arg4: i64, %arg5: i64, %arg6: i64{{(, %arg[0-9]+: !llvm.ptr, %arg[0-9]+: !llvm.ptr, %arg[0-9]+: i64, %arg[0-9]+: i64, %arg[0-9]+: i64){3}\)}}
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @_internal_linear_pruned_weight(
// CHECK-LABEL: llvm.func @_mlir_ciface_linear_pruned_weight(
// CHECK-SAME:      %arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: !llvm.ptr, %arg4: !llvm.ptr)
// CHECK:         llvm.call @linear_pruned_weight(
func.func @linear_pruned_weight(%x: tensor<3x8xf32>, %w: tensor<16x8xf32> {smlir.weight}) -> tensor<3x16xf32> attributes { llvm.emit_c_interface } {
  %s = smlir.sparsify %w : tensor<16x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr {tensor_name = "fc.weight"} -> tensor<16x8xf32, #CSR>
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%s : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<3x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<3x16xf32>) -> tensor<3x16xf32>
  %y = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

/// The threshold mask survives as |x| >= 0.05 in front of the CSR insertion.
// CHECK-LABEL: llvm.func @_internal_threshold_to_csr(
// CHECK:         %[[CUT:.*]] = llvm.mlir.constant(5.000000e-02 : f32) : f32
// CHECK:         %[[ABS:.*]] = llvm.intr.fabs(%{{.*}}) : (f32) -> f32
// CHECK-NEXT:    llvm.fcmp "oge" %[[ABS]], %[[CUT]] : f32
// CHECK:         llvm.call @_insert_dense_compressed_8_8_f32_32_32(

/// The wrapped bodies (@_internal_*) are printed together, after the wrappers.
/// A CSR matrix on a matmul's left runs the SpMM kernel (smlir-raise-sparse-matmuls).
// CHECK-LABEL: llvm.func @_internal_csr_arg_matmul(
// CHECK:         llvm.call @smlir_spmm_csr_features4(

/// The linear with a CSR weight runs smlir-lower-sparse-linear's loops,
/// outlined into a private kernel function (checked at the end).
// CHECK-LABEL: llvm.func @_internal_linear_pruned_weight(
// CHECK:         llvm.call @smlir_linear_csr_3x8x16(

/// Sparsify inside the function, then multiply: all dense at the boundary, so
/// no wrapper; the mask, then the SpMM kernel on the CSR it built.
// CHECK-LABEL: llvm.func @csr_weight_matmul(
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> attributes {llvm.emit_c_interface}
// CHECK:         %[[CUT:.*]] = llvm.mlir.constant(5.000000e-02 : f32) : f32
// CHECK:         %[[ABS:.*]] = llvm.intr.fabs(%{{.*}}) : (f32) -> f32
// CHECK-NEXT:    llvm.fcmp "oge" %[[ABS]], %[[CUT]] : f32
// CHECK:         llvm.call @smlir_spmm_csr_features4(
// CHECK-LABEL: llvm.func @_mlir_ciface_csr_weight_matmul(
// CHECK:         llvm.call @csr_weight_matmul(
func.func @csr_weight_matmul(%w: tensor<8x8xf32>, %x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes { llvm.emit_c_interface } {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf32, #CSR>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x4xf32>) -> tensor<8x4xf32>
  %y = linalg.matmul ins(%s, %x : tensor<8x8xf32, #CSR>, tensor<8x4xf32>) outs(%acc : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

/// keep_all into CSR and back to dense: the CSR tensor only lives inside,
/// but it is built (the convert pair is not folded away).
// CHECK-LABEL: llvm.func @keep_all_csr_back_to_dense(
// CHECK-SAME:      -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> attributes {llvm.emit_c_interface}
// CHECK:         llvm.call @_insert_dense_compressed_8_8_f32_32_32(
// CHECK-LABEL: llvm.func @_mlir_ciface_keep_all_csr_back_to_dense(
// CHECK:         llvm.call @keep_all_csr_back_to_dense(

/// Outlined kernels come last. With 3 tokens, the linear's decode form: CSR
/// coordinates (i32) gather x, scalar FMAs accumulate each of 4 rows in
/// lockstep.
// CHECK-LABEL: llvm.func @smlir_linear_csr_3x8x16(
// CHECK-SAME:      attributes {sym_visibility = "private"}
// CHECK:         llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK:         llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32) -> f32
// CHECK:         llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32) -> f32
func.func @keep_all_csr_back_to_dense(%x: tensor<8x8xf32>) -> tensor<8x8xf32> attributes { llvm.emit_c_interface } {
  %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.keep_all as #smlir.csr -> tensor<8x8xf32, #CSR>
  %d = sparse_tensor.convert %s : tensor<8x8xf32, #CSR> to tensor<8x8xf32>
  return %d : tensor<8x8xf32>
}
