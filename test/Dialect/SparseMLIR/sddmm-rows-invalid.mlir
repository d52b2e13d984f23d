// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

// One case per smlir.sddmm_rows / smlir.sparse_attention verifier message.

func.func @negative_sparse_operand(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32, #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed) }>>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects dense tensors (the mask is given by its CSR buffers)}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32, #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed) }>>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_2d_positions(%pos: tensor<?x2xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects 1-d positions and coordinates, got 'tensor<?x2xi32>' and 'tensor<?xi32>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?x2xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_float_coordinates(%pos: tensor<?xi32>, %crd: tensor<?xf32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects integer positions and coordinates, got 'i32' and 'f32'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xf32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// The kernel computes in f32.
func.func @negative_f64_operand(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf64>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects f32 values [nnz], a [B, M, D], b [B, N, D] and result [B, nnz], got 'tensor<?x4x8xf64>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf64>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// G accumulators of W lanes reduce into one vector<G>: G <= W.
func.func @negative_group_above_lanes(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects lanes a power of two from 2 to 32 and group a power of two up to lanes, got lanes = 8 and group = 16}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {group = 16 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_lanes_not_power_of_two(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{got lanes = 12 and group = 4}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {group = 4 : i64, lanes = 12 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

/// A row of a stays in registers: D is static and a's and b's.
func.func @negative_contraction_mismatch(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x16xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects a static contraction D shared by a and b, got 'tensor<?x4x8xf32>' and 'tensor<?x6x16xf32>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x16xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_batch_mismatch(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<2x4x8xf32>, %b: tensor<3x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects one batch size, got 'tensor<2x4x8xf32>' and 'tensor<3x6x8xf32>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<2x4x8xf32>, tensor<3x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_positions_not_rows_plus_one(%pos: tensor<4xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects 5 positions (rows + 1), got 'tensor<4xi32>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<4xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_nnz_mismatch(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<9xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x7xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects the result's 7 entries per batch entry, got 'tensor<9xf32>'}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b : tensor<?xi32>, tensor<?xi32>, tensor<9xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x7xf32>
  return %s : tensor<?x7xf32>
}

// -----

/// A tile's row cursors sit on the stack.
func.func @negative_tile_rows(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %values: tensor<?xf32>, %a: tensor<?x4x8xf32>, %b: tensor<?x6x8xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'smlir.sddmm_rows' op expects tile_rows 1 to 1024, l1_budget and min_reuse >= 0 and prefetch 0 to 64}}
  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b {tile_rows = 0 : i64} : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, tensor<?x4x8xf32>, tensor<?x6x8xf32> -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

func.func @negative_attention_head_size(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x4x8xf32>, %k: tensor<?x6x16xf32>, %v: tensor<?x6x8xf32>) -> tensor<?x4x8xf32> {
  // expected-error@+1 {{'smlir.sparse_attention' op expects a static head size D shared by q and k, got 'tensor<?x4x8xf32>' and 'tensor<?x6x16xf32>'}}
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 1.0 : f32} : tensor<?xi32>, tensor<?xi32>, tensor<?x4x8xf32>, tensor<?x6x16xf32>, tensor<?x6x8xf32> -> tensor<?x4x8xf32>
  return %o : tensor<?x4x8xf32>
}

// -----

func.func @negative_attention_value_size(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x4x8xf32>, %k: tensor<?x6x8xf32>, %v: tensor<?x6x8xf32>) -> tensor<?x4x4xf32> {
  // expected-error@+1 {{'smlir.sparse_attention' op expects a static value size F shared by v and the result, got 'tensor<?x6x8xf32>' and 'tensor<?x4x4xf32>'}}
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 1.0 : f32} : tensor<?xi32>, tensor<?xi32>, tensor<?x4x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x4x4xf32>
  return %o : tensor<?x4x4xf32>
}

// -----

/// A row's scores sit in a stack buffer of N floats: N static.
func.func @negative_attention_dynamic_columns(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x4x8xf32>, %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>) -> tensor<?x4x8xf32> {
  // expected-error@+1 {{'smlir.sparse_attention' op expects a static column count N (at most 262144) shared by k and v, got 'tensor<?x?x8xf32>' and 'tensor<?x?x8xf32>'}}
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 1.0 : f32} : tensor<?xi32>, tensor<?xi32>, tensor<?x4x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x4x8xf32>
  return %o : tensor<?x4x8xf32>
}

// -----

func.func @negative_attention_rows(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %q: tensor<?x4x8xf32>, %k: tensor<?x6x8xf32>, %v: tensor<?x6x8xf32>) -> tensor<?x5x8xf32> {
  // expected-error@+1 {{'smlir.sparse_attention' op expects the result's rows to be q's, got 'tensor<?x4x8xf32>' and 'tensor<?x5x8xf32>'}}
  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {scale = 1.0 : f32} : tensor<?xi32>, tensor<?xi32>, tensor<?x4x8xf32>, tensor<?x6x8xf32>, tensor<?x6x8xf32> -> tensor<?x5x8xf32>
  return %o : tensor<?x5x8xf32>
}
