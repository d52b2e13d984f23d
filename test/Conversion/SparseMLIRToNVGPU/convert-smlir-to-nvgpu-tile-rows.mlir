// RUN: not sparse-mlir-opt %s -convert-smlir-to-nvgpu=tile-rows=192 2>&1 | FileCheck %s --check-prefix=TILE

// tile-rows must be a power-of-two multiple of 64 rows up to 512 (checked
// with tile-tokens and warp-tokens, in one message).

// TILE: error: convert-smlir-to-nvgpu: tile-rows must be 64, 128, 256 or 512, tile-tokens a multiple of 32 up to 128 and warp-tokens 32 or 64, got 192, 64 and 64
func.func @tile_rows_192() {
  return
}
