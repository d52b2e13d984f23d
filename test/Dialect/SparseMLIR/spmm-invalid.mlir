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

/// Only A may be sparse.
func.func @negative_sparse_h(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %h: tensor<4x8xf32, #CSR>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects a dense h and result, got 'tensor<4x8xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>>'}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<4x8xf32, #CSR> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// A's buffers are sparse_tensor's own: one of them sparse is a mistake.
func.func @negative_sparse_buffer(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<4x8xf32, #CSR>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects dense tensors (A is given by its CSR buffers)}}
  %y = smlir.spmm %pos, %crd, %values, %h : tensor<?xi32>, tensor<?xi32>, tensor<4x8xf32, #CSR>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @negative_two_operands(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %h: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects A as its three CSR buffers or as one CSR tensor, got 2 operands before h}}
  %y = smlir.spmm %pos, %crd, %h : tensor<?xi32>, tensor<?xi32>, tensor<?x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>

func.func @negative_coo_matrix(%a: tensor<4x4xf32, #COO>, %h: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects A as one CSR tensor (dense then compressed levels, identity map)}}
  %y = smlir.spmm %a, %h : tensor<4x4xf32, #COO>, tensor<4x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @negative_dense_matrix(%a: tensor<4x4xf32>, %h: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects A as one CSR tensor (dense then compressed levels, identity map), got 'tensor<4x4xf32>'}}
  %y = smlir.spmm %a, %h : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @negative_matrix_element_type(%a: tensor<4x4xf64, #CSR>, %h: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects A, h and result of one element type, got 'f64', 'f32' and 'f32'}}
  %y = smlir.spmm %a, %h : tensor<4x4xf64, #CSR>, tensor<4x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @negative_matrix_columns(%a: tensor<4x5xf32, #CSR>, %h: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects h's rows to be A's columns, got 'tensor<4x5xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>>' and 'tensor<4x8xf32>'}}
  %y = smlir.spmm %a, %h : tensor<4x5xf32, #CSR>, tensor<4x8xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @negative_matrix_rows(%a: tensor<4x4xf32, #CSR>, %h: tensor<4x8xf32>) -> tensor<3x8xf32> {
  // expected-error@+1 {{'smlir.spmm' op expects the result's rows to be A's, got 'tensor<4x4xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>>' and 'tensor<3x8xf32>'}}
  %y = smlir.spmm %a, %h : tensor<4x4xf32, #CSR>, tensor<4x8xf32> -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

func.func @negative_h_alone(%h: tensor<?x8xf32>) {
  // expected-error@+1 {{expects A's operands, then h}}
  %y = smlir.spmm %h : tensor<?x8xf32> -> tensor<?x8xf32>
  return
}
