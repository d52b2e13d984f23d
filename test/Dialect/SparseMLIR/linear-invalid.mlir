// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.linear verifier message.

func.func @rank(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op expects a 2-d input, weight and result, got 'tensor<2x4x8xf32>', 'tensor<16x8xf32>' and 'tensor<2x4x16xf32>'}}
  %y = smlir.linear %x, %w : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  return
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @sparse_input(%x: tensor<4x8xf32, #CSR>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op expects a dense input and result (only the weight may be sparse)}}
  %y = smlir.linear %x, %w : tensor<4x8xf32, #CSR>, tensor<16x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @mixed_operand_types(%x: tensor<4x8xf32>, %w: tensor<16x8xf16>) {
  // expected-error@+1 {{'smlir.linear' op expects x and W of one floating-point element type, got 'f32' and 'f16'}}
  %y = smlir.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @integer(%x: tensor<4x8xi32>, %w: tensor<16x8xi32>) {
  // expected-error@+1 {{'smlir.linear' op expects x and W of one floating-point element type, got 'i32' and 'i32'}}
  %y = smlir.linear %x, %w : tensor<4x8xi32>, tensor<16x8xi32> -> tensor<4x16xi32>
  return
}

// -----

/// The result may be wider than the operands (the accumulation type), not
/// narrower.
func.func @narrower_result(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op expects a result element type of 'f32' (x's and W's) or a wider float, got 'f16'}}
  %y = smlir.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf16>
  return
}

// -----

/// bf16 has f16's width and cannot hold every f16 value.
func.func @same_width_result(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error@+1 {{'smlir.linear' op expects a result element type of 'f16' (x's and W's) or a wider float, got 'bf16'}}
  %y = smlir.linear %x, %w : tensor<4x8xf16>, tensor<16x8xf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @integer_result(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error@+1 {{'smlir.linear' op expects a result element type of 'f16' (x's and W's) or a wider float, got 'i32'}}
  %y = smlir.linear %x, %w : tensor<4x8xf16>, tensor<16x8xf16> -> tensor<4x16xi32>
  return
}

// -----

func.func @features(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error@+1 {{'smlir.linear' op input has 8 features but the out_in weight 'tensor<8x16xf32>' reads 16}}
  %y = smlir.linear %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @in_out_features(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op input has 8 features but the in_out weight 'tensor<16x8xf32>' reads 16}}
  %y = smlir.linear %x, %w orientation <in_out> : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @result_outputs(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op result 'tensor<?x8xf32>' must be [?, 16] (tokens of the input, outputs of the out_in weight)}}
  %y = smlir.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x8xf32>
  return
}

// -----

func.func @result_tokens(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'smlir.linear' op result 'tensor<5x16xf32>' must be [4, 16] (tokens of the input, outputs of the out_in weight)}}
  %y = smlir.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<5x16xf32>
  return
}

// -----

func.func @bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) {
  // expected-error@+1 {{'smlir.linear' op bias must be a dense 16-element 'f32' vector, got 'tensor<8xf32>'}}
  %y = smlir.linear %x, %w bias %b : tensor<4x8xf32>, tensor<16x8xf32>, tensor<8xf32> -> tensor<4x16xf32>
  return
}

// -----

/// With a wider result, the bias has the result's element type.
func.func @mixed_precision_bias(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>, %b: tensor<16xf16>) {
  // expected-error@+1 {{'smlir.linear' op bias must be a dense 16-element 'f32' vector, got 'tensor<16xf16>'}}
  %y = smlir.linear %x, %w bias %b : tensor<4x8xf16>, tensor<16x8xf16>, tensor<16xf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @orientation(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+2 {{custom op 'smlir.linear' expected ::mlir::smlir::WeightOrientation to be one of: out_in, in_out}}
  // expected-error@+1 {{failed to parse SparseMLIR_WeightOrientationAttr parameter 'value'}}
  %y = smlir.linear %x, %w orientation <sideways> : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  return
}

// -----

/// Accumulate-into: one case per message.

func.func @columns_without_into(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %c: tensor<3xi64>) {
  // expected-error@+1 {{'smlir.linear' op columns name where W's rows go in the y it accumulates into: they need `into`}}
  %y = smlir.linear %x, %w columns(%c : tensor<3xi64>) : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @into_other_type(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %into: tensor<4x16xf16>) {
  // expected-error@+1 {{'smlir.linear' op accumulates into 'tensor<4x16xf16>', which must be the result's type 'tensor<4x16xf32>'}}
  %y = smlir.linear %x, %w into(%into : tensor<4x16xf16>) : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  return
}

// -----

/// A bias is the first part's (the kernel writing y), never added twice.
func.func @into_with_bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %into: tensor<4x16xf32>) {
  // expected-error@+1 {{'smlir.linear' op accumulates into y with a bias: the bias is added by the kernel that writes y first, not by one accumulating into it}}
  %y = smlir.linear %x, %w bias %b into(%into : tensor<4x16xf32>) : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @into_in_out(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %into: tensor<4x16xf32>) {
  // expected-error@+1 {{'smlir.linear' op accumulates into y only for an out_in weight (W[N, K])}}
  %y = smlir.linear %x, %w into(%into : tensor<4x16xf32>) orientation <in_out> : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @into_wider_without_columns(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %into: tensor<4x16xf32>) {
  // expected-error@+1 {{'smlir.linear' op result 'tensor<4x16xf32>' must be [4, 3] (tokens of the input, outputs of the out_in weight)}}
  %y = smlir.linear %x, %w into(%into : tensor<4x16xf32>) : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @columns_wrong_count(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %into: tensor<4x16xf32>, %c: tensor<4xi64>) {
  // expected-error@+1 {{'smlir.linear' op columns must be a dense 3-element i32 or i64 vector (one y column per row of W), got 'tensor<4xi64>'}}
  %y = smlir.linear %x, %w into(%into : tensor<4x16xf32>) columns(%c : tensor<4xi64>) : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @columns_float(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %into: tensor<4x16xf32>, %c: tensor<3xf32>) {
  // expected-error@+1 {{'smlir.linear' op columns must be a dense 3-element i32 or i64 vector (one y column per row of W), got 'tensor<3xf32>'}}
  %y = smlir.linear %x, %w into(%into : tensor<4x16xf32>) columns(%c : tensor<3xf32>) : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x16xf32>
  return
}
