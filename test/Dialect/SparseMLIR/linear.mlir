// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// smlir.linear survives parse -> print -> parse in each of its forms: the
// default out_in orientation is elided, a bias and in_out are printed.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @out_in_dynamic_tokens(
// CHECK-SAME:      %[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<32x64xf32, #{{.*}}>)
// CHECK:         %[[Y:.*]] = smlir.linear %[[X]], %[[W]] : tensor<?x64xf32>, tensor<32x64xf32, #{{.*}}> -> tensor<?x32xf32>
// CHECK:         return %[[Y]]
func.func @out_in_dynamic_tokens(%x: tensor<?x64xf32>, %w: tensor<32x64xf32, #CSR>) -> tensor<?x32xf32> {
  %y = smlir.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32, #CSR> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @bias_and_in_out(
// CHECK-SAME:      %[[X:.*]]: tensor<4x64xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK:         smlir.linear %[[X]], %[[W]] bias %[[B]] orientation <in_out> : tensor<4x64xf32>, tensor<64x32xf32>, tensor<32xf32> -> tensor<4x32xf32>
func.func @bias_and_in_out(%x: tensor<4x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %y = smlir.linear %x, %w bias %b orientation <in_out> : tensor<4x64xf32>, tensor<64x32xf32>, tensor<32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @explicit_default_orientation_is_elided(
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<2x8xf16> -> tensor<4x2xf16>
func.func @explicit_default_orientation_is_elided(%x: tensor<4x8xf16>, %w: tensor<2x8xf16>) -> tensor<4x2xf16> {
  %y = smlir.linear %x, %w orientation <out_in> : tensor<4x8xf16>, tensor<2x8xf16> -> tensor<4x2xf16>
  return %y : tensor<4x2xf16>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Mixed precision: f16 operands accumulated into an f32 result (torch's
/// F.linear in f16), with a bias of the result's element type.
// CHECK-LABEL: func.func @f16_operands_f32_result(
// CHECK-SAME:      %[[X:.*]]: tensor<64x64xf16>, %[[W:.*]]: tensor<32x64xf16, #{{.*}}>, %[[B:.*]]: tensor<32xf32>)
// CHECK:         smlir.linear %[[X]], %[[W]] bias %[[B]] : tensor<64x64xf16>, tensor<32x64xf16, #{{.*}}>, tensor<32xf32> -> tensor<64x32xf32>
func.func @f16_operands_f32_result(%x: tensor<64x64xf16>, %w: tensor<32x64xf16, #NM24>, %b: tensor<32xf32>) -> tensor<64x32xf32> {
  %y = smlir.linear %x, %w bias %b : tensor<64x64xf16>, tensor<32x64xf16, #NM24>, tensor<32xf32> -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @bf16_operands_f32_result(
// CHECK:         smlir.linear %{{.*}}, %{{.*}} : tensor<?x8xbf16>, tensor<2x8xbf16> -> tensor<?x2xf32>
func.func @bf16_operands_f32_result(%x: tensor<?x8xbf16>, %w: tensor<2x8xbf16>) -> tensor<?x2xf32> {
  %y = smlir.linear %x, %w : tensor<?x8xbf16>, tensor<2x8xbf16> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

/// Accumulate-into: `into` (and `columns`) round-trip.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

// CHECK-LABEL: func.func @accumulate_into_columns(
// CHECK-SAME:      %[[X:.*]]: tensor<4x64xf32>, %[[W:.*]]: tensor<3x64xf32, #{{.*}}>, %[[Y:.*]]: tensor<4x32xf32>, %[[C:.*]]: tensor<3xi64>)
// CHECK:         smlir.linear %[[X]], %[[W]] into(%[[Y]] : tensor<4x32xf32>) columns(%[[C]] : tensor<3xi64>) : tensor<4x64xf32>, tensor<3x64xf32, #{{.*}}> -> tensor<4x32xf32>
// CHECK:         smlir.linear %[[X]], %{{.*}} into(%[[Y]] : tensor<4x32xf32>) : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
func.func @accumulate_into_columns(%x: tensor<4x64xf32>, %w: tensor<3x64xf32, #CSR>, %y: tensor<4x32xf32>,
                                   %c: tensor<3xi64>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %0 = smlir.linear %x, %w into(%y : tensor<4x32xf32>) columns(%c : tensor<3xi64>)
      : tensor<4x64xf32>, tensor<3x64xf32, #CSR> -> tensor<4x32xf32>
  %d = arith.constant dense<1.0> : tensor<32x64xf32>
  %1 = smlir.linear %x, %d into(%y : tensor<4x32xf32>) : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %0, %1 : tensor<4x32xf32>, tensor<4x32xf32>
}
