// RUN: sparse-mlir-opt %s -smlir-sparse-fallback=fail=true -split-input-file -verify-diagnostics | FileCheck %s

// With fail=true a fallback is an error and the pass fails (nothing is
// printed for that input); functions whose sparse arguments all have a
// sparse lowering still pass through unchanged.
// CHECK-NOT:   @generic_reader_is_an_error
// CHECK-NOT:   @one_error_per_op_and_format

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#ID = affine_map<(d0, d1) -> (d0, d1)>

/// The fallback of smlir-sparse-fallback.mlir, as an error with the same text.
func.func @generic_reader_is_an_error(%w: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "proj.weight"}) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-error @below {{no sparse lowering for 'linalg.generic' reading tensor 'proj.weight' stored as csr; computing it densely}}
  %r = linalg.generic {indexing_maps = [#ID, #ID], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %c: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Errors are deduplicated per (op, format) like warnings: two transposes of
/// one CSR weight give one error (on the first reader in program order); a
/// 2:4 weight read by a transpose is another tensor and format and is
/// reported too, as is an unnamed argument's matmul.
func.func @one_error_per_op_and_format(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc1.weight"}, %v: tensor<16x8xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc2.weight"}, %x: tensor<3x16xf32>, %u: tensor<16x8xf32, #CSR>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<3x8xf32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-error @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc1.weight' stored as csr; computing it densely}}
  %t1 = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %t2 = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  // expected-error @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc2.weight' stored as 2:4; computing it densely}}
  %t3 = linalg.transpose ins(%v : tensor<16x8xf32, #NM24>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<3x8xf32>
  // expected-error @below {{no sparse lowering for 'linalg.matmul' reading tensor '<argument>' stored as sparse; computing it densely}}
  %y = linalg.matmul ins(%x, %u : tensor<3x16xf32>, tensor<16x8xf32, #CSR>) outs(%e2 : tensor<3x8xf32>) -> tensor<3x8xf32>
  return %t1, %t2, %t3, %y : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<3x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Only supported readers: no error, the pass succeeds and the weight stays
/// sparse, with #smlir.storage<sparse>.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @negative_supported_readers_pass(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x3xf32>, %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[W]], %[[X]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%[[B]] : tensor<16x3xf32>)
// CHECK-NEXT:    %[[D:.*]] = sparse_tensor.convert %[[W]] : tensor<16x8xf32, #[[$CSR]]> to tensor<16x8xf32>
// CHECK-NEXT:    return %[[R]], %[[D]], %[[W]] :
func.func @negative_supported_readers_pass(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc.weight"}, %x: tensor<8x3xf32>, %b: tensor<16x3xf32>) -> (tensor<16x3xf32>, tensor<16x8xf32>, tensor<16x8xf32, #CSR>) {
  %r = linalg.matmul ins(%w, %x : tensor<16x8xf32, #CSR>, tensor<8x3xf32>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  %d = sparse_tensor.convert %w : tensor<16x8xf32, #CSR> to tensor<16x8xf32>
  return %r, %d, %w : tensor<16x3xf32>, tensor<16x8xf32>, tensor<16x8xf32, #CSR>
}
