// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.sampled_matmul verifier message.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @rank(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op expects 2-d operands and pattern, got 'tensor<2x4x8xf32>'}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @sparse_operand(%a: tensor<4x8xf32, #CSR>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op expects dense operands (only the pattern is sparse)}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf32, #CSR>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR>
  return
}

// -----

func.func @dense_pattern(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op expects a pattern with a #sparse_tensor.encoding (its stored positions are the sampled ones), got 'tensor<4x16xf32>'}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @mixed_element_types(%a: tensor<4x8xf16>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op expects operands and pattern of one floating-point element type, got 'f16', 'f32' and 'f32'}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf16>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @integer_elements(%a: tensor<4x8xi32>, %b: tensor<8x16xi32>, %s: tensor<4x16xi32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op expects operands and pattern of one floating-point element type, got 'i32', 'i32' and 'i32'}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xi32>, tensor<8x16xi32>, tensor<4x16xi32, #CSR> -> tensor<4x16xi32, #CSR>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#CSR64 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64 }>

/// The result keeps the pattern's positions: its type is the pattern's.
func.func @result_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op result must have the pattern's type}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR64>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// dy [T, N] read as dy^T: its first dimension is the contraction.
func.func @contraction_mismatch(%dy: tensor<7x4xf32>, %x: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op contraction dimensions differ: lhs transposed 'tensor<7x4xf32>' has 7, rhs identity 'tensor<8x16xf32>' has 8}}
  %r = smlir.sampled_matmul %dy, %x, %s lhs <transposed> : tensor<7x4xf32>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @pattern_shape(%a: tensor<4x8xf32>, %k: tensor<16x8xf32>, %s: tensor<4x15xf32, #CSR>) {
  // expected-error@+1 {{'smlir.sampled_matmul' op pattern 'tensor<4x15xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>>' must be [4, 16] (rows of the lhs, columns of the rhs as read)}}
  %r = smlir.sampled_matmul %a, %k, %s rhs <transposed> : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x15xf32, #CSR> -> tensor<4x15xf32, #CSR>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @unknown_layout(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #CSR>) {
  // expected-error@+2 {{custom op 'smlir.sampled_matmul' expected ::mlir::smlir::OperandLayout to be one of: identity, transposed}}
  // expected-error@+1 {{failed to parse SparseMLIR_OperandLayoutAttr parameter 'value'}}
  %r = smlir.sampled_matmul %a, %b, %s lhs <sideways> : tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32, #CSR> -> tensor<4x16xf32, #CSR>
  return
}
