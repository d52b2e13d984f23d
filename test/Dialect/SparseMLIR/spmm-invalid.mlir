// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.spmm verifier message.

func.func @negative_2d_positions(%pos: tensor<?x2xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects 1-d positions, coordinates and values, got 'tensor<?x2xi32>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?x2xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @negative_float_coordinates(%pos: tensor<?xi32>, %crd: tensor<?xf32>, %values: tensor<?xf32>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects integer positions and coordinates, got 'i32' and 'f32'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xf32>, tensor<?xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @negative_mixed_element_types(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf64>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects values, h and result of one floating-point element type, got 'f64', 'f32' and 'f32'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf64>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @negative_1d_h(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects a 2-d h and result, got 'tensor<?xf32>' and 'tensor<?x8xf32>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

/// The feature count fixes the kernel's register tile: it must be static.
func.func @negative_dynamic_features(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects a static feature count shared by h and the result, got 'tensor<?x?xf32>' and 'tensor<?x?xf32>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @negative_features_differ(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x8xf32>) -> tensor<?x16xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects a static feature count shared by h and the result, got 'tensor<?x8xf32>' and 'tensor<?x16xf32>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x8xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @negative_rows_mismatch(%pos: tensor<5xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<?x8xf32>) -> tensor<3x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects 4 positions (result rows + 1), got 'tensor<5xi32>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<5xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x8xf32> -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// A is its buffers: a sparse h is a mistake.
func.func @negative_sparse_h(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<4x8xf32, #CSR>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects dense tensors (A is given by its CSR buffers)}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<4x8xf32, #CSR> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
