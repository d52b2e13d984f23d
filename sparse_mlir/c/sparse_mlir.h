/*===- sparse_mlir.h - run exported sparse_mlir models from C -------------===*
 *
 * Loads an artifact directory written by `CompiledModule.export(path)` and
 * runs it: no Python, no MLIR, no compiler. Build your program with
 *
 *   cc -I<this dir> app.c <this dir>/sparse_mlir_runtime.c -ldl
 *
 * (`python -c "import sparse_mlir.runtime.artifact as a; print(a.c_dir())"` prints
 * this directory). The threads of parallel kernels come from the libomp the
 * artifact carries; OMP_NUM_THREADS sets how many.
 *
 * Artifact layout: model.so (the compiled code; entry point
 * `_mlir__mlir_ciface_main(void **args)`), lib/ (runtime libraries it needs),
 * weights.bin, manifest.json (the same facts for people). weights.bin, all
 * little-endian:
 *
 *   char     magic[8]        "SMLIRART"
 *   uint32   crc32           CRC-32 (zlib's) of every byte after this field
 *   uint32   format_version  SMLIR_FORMAT_VERSION
 *   uint32   flags           bit 0: @main takes a trailing i64 call number;
 *                            bit 1: target="cuda" host code (Python loader only;
 *                            buffers with bytes == 0 are device scratch)
 *   uint32   num_inputs
 *   uint32   num_buffers     packed weights, passed before the inputs
 *   uint32   library_crc32   CRC-32 of model.so
 *   uint64   data_offset
 *   char     cpu_flags[512]  ISA extensions needed (/proc/cpuinfo names)
 *   record   result, inputs[num_inputs], buffers[num_buffers]
 *   ...      buffer data at each record's offset (64-byte aligned)
 *
 *   record: uint32 dtype, uint32 rank, int64 shape[8], uint64 offset,
 *           uint64 bytes
 *
 *===----------------------------------------------------------------------===*/

#ifndef SPARSE_MLIR_H
#define SPARSE_MLIR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMLIR_FORMAT_VERSION 1
#define SMLIR_MAX_RANK 8

typedef enum smlir_dtype {
  SMLIR_F32 = 1,
  SMLIR_F64 = 2,
  SMLIR_F16 = 3,
  SMLIR_I8 = 4,
  SMLIR_I16 = 5,
  SMLIR_I32 = 6,
  SMLIR_I64 = 7,
} smlir_dtype;

/* A dense, row-major tensor the caller owns. */
typedef struct smlir_tensor {
  void *data;
  int32_t dtype; /* smlir_dtype */
  int32_t rank;
  int64_t shape[SMLIR_MAX_RANK];
} smlir_tensor;

typedef struct smlir_model smlir_model;

/* Loads the artifact directory `path`. On failure returns NULL and writes a
 * message (what is wrong, what to do) into `error`. */
smlir_model *smlir_load(const char *path, char *error, size_t error_size);
void smlir_free(smlir_model *model);

int smlir_num_inputs(const smlir_model *model);
/* The expected dtype and shape of input `index` / of the output (data = NULL).
 * Return 0, or -1 for a bad index. */
int smlir_input_spec(const smlir_model *model, int index, smlir_tensor *spec);
int smlir_output_spec(const smlir_model *model, smlir_tensor *spec);
size_t smlir_dtype_size(int32_t dtype);
size_t smlir_num_elements(const smlir_tensor *tensor);

/* Runs the model: `inputs` must match the input specs exactly; the result is
 * written to `output->data`, which the caller allocated with the output
 * spec's size (dtype and shape are filled in). Returns 0, or -1 with a
 * message in `error`. Calls on one model must not overlap. */
int smlir_run(smlir_model *model, const smlir_tensor *inputs, int num_inputs, smlir_tensor *output, char *error,
              size_t error_size);

/* The call number the next run passes (models with random-fraction
 * sparsifiers draw a new mask per call; 0 after loading). */
void smlir_set_call_number(smlir_model *model, int64_t call);

#ifdef __cplusplus
}
#endif

#endif /* SPARSE_MLIR_H */
