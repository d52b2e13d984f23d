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
 * weights.bin, manifest.json (the same facts for people). weights.bin is the
 * artifact's root of trust: its header binds every other file by SHA-256, and
 * the SHA-256 of the header (the artifact's hash, `smlir_artifact_sha256`)
 * binds the whole artifact. All little-endian:
 *
 *   char     magic[8]           "SMLIRART"
 *   uint32   reserved           0 (version 1 kept a CRC-32 here)
 *   uint32   format_version     SMLIR_FORMAT_VERSION (at this offset in every version)
 *   uint32   flags              bit 0: @main takes a trailing i64 call number;
 *                               bit 1: target="cuda" host code (Python loader only;
 *                               buffers with bytes == 0 are device scratch)
 *   uint32   num_inputs         at most SMLIR_MAX_INPUTS
 *   uint32   num_buffers        packed weights, passed before the inputs; at most SMLIR_MAX_BUFFERS
 *   uint32   num_files          files bound by hash (model.so, manifest.json, lib/...); at most SMLIR_MAX_FILES
 *   uint64   data_offset        size of the header (64-byte aligned); the data follows
 *   uint64   data_bytes         size of the data: the file is exactly data_offset + data_bytes
 *   uint8    header_sha256[32]  SHA-256 of bytes [0, data_offset) with this field zeroed
 *   uint8    data_sha256[32]    SHA-256 of bytes [data_offset, data_offset + data_bytes)
 *   char     cpu_flags[512]     ISA extensions needed (/proc/cpuinfo names)
 *   record   result, inputs[num_inputs], buffers[num_buffers]
 *   file     files[num_files]
 *   ...      zeros up to data_offset, then buffer data at each record's offset (64-byte aligned)
 *
 *   record: uint32 dtype, uint32 rank (<= 8), int64 shape[8] (unused ones 0),
 *           uint64 offset, uint64 bytes (= the elements' bytes; 0 for CUDA scratch)
 *           An input's record has no data: its offset is, for an integer input
 *           whose values index a table (an embedding's ids), the exclusive upper
 *           bound of its values (they must lie in [0, offset); 0: unchecked).
 *           smlir_run checks them: the compiled gather would abort the process.
 *           Its bytes are its kind (format 3; format 2 wrote 0 there): 0, a dense
 *           tensor; SMLIR_INPUT_CSR | pos_bits << 8 | crd_bits << 16 (bits 32
 *           or 64), a float32 CSR matrix of the record's [rows, cols] and any
 *           nnz, which @main takes as three 1-D memrefs: positions [rows + 1],
 *           coordinates [nnz], values [nnz] (see smlir_csr).
 *   file:   char name[64] (NUL-padded path under the artifact: "model.so",
 *           "lib/libomp.so.5"), uint64 bytes, uint8 sha256[32]
 *
 * The loaders check every hash before any code is loaded; lib/ must hold
 * exactly the files listed. Only regular files are opened.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SPARSE_MLIR_H
#define SPARSE_MLIR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMLIR_FORMAT_VERSION 3 /* this loader also reads version 2 (no CSR inputs) */
#define SMLIR_INPUT_CSR 1
#define SMLIR_MAX_RANK 8
#define SMLIR_MAX_INPUTS 1024
#define SMLIR_MAX_BUFFERS 65536
#define SMLIR_MAX_FILES 64
#define SMLIR_FILE_NAME_BYTES 64

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

/* A CSR matrix input (smlir_input_csr says which inputs are): the caller's
 * buffers, read in place. positions holds rows + 1 entries of the input's
 * pos dtype, coordinates nnz entries of its crd dtype (SMLIR_I32 or
 * SMLIR_I64), values nnz floats; nnz may differ on every call (a new graph
 * needs no new artifact). smlir_run checks them before the kernel reads
 * them: positions from 0 to nnz, never decreasing; coordinates in
 * [0, cols), strictly increasing within each row. NULL buffers are allowed
 * only where they hold nothing (nnz = 0). */
typedef struct smlir_csr {
  const void *positions;
  const void *coordinates;
  const float *values;
  int64_t nnz;
} smlir_csr;

typedef struct smlir_model smlir_model;

/* Loads the artifact directory `path`. On failure returns NULL and writes a
 * message (what is wrong, what to do) into `error`. */
smlir_model *smlir_load(const char *path, char *error, size_t error_size);
/* As smlir_load, and refuses the artifact unless its hash (the SHA-256 of
 * weights.bin's header, 64 hex digits) is `expect_sha256`: pass the hash
 * published with the model, obtained out of band. NULL checks nothing more. */
smlir_model *smlir_load_expecting(const char *path, const char *expect_sha256, char *error, size_t error_size);
/* The loaded artifact's hash as 64 hex digits and a NUL. */
void smlir_artifact_sha256(const smlir_model *model, char out[65]);
/* SHA-256 of `size` bytes (FIPS 180-4), as the loader checks files with. */
void smlir_sha256(const void *data, size_t size, uint8_t digest[32]);
void smlir_free(smlir_model *model);

int smlir_num_inputs(const smlir_model *model);
/* The expected dtype and shape of input `index` / of the output (data = NULL).
 * Return 0, or -1 for a bad index. */
int smlir_input_spec(const smlir_model *model, int index, smlir_tensor *spec);
int smlir_output_spec(const smlir_model *model, smlir_tensor *spec);
/* 1 if input `index` is a CSR matrix (its index dtypes in *pos_dtype and
 * *crd_dtype where not NULL), 0 if it is dense, -1 for a bad index. */
int smlir_input_csr(const smlir_model *model, int index, int32_t *pos_dtype, int32_t *crd_dtype);
size_t smlir_dtype_size(int32_t dtype);
size_t smlir_num_elements(const smlir_tensor *tensor);

/* Runs the model: `inputs` must match the input specs exactly; the result is
 * written to `output->data`, which the caller allocated with the output
 * spec's size (dtype and shape are filled in). A CSR input (smlir_input_csr)
 * gives the matrix's dtype, rank and shape as its spec does, and `data`
 * pointing at an smlir_csr. Returns 0, or -1 with a message in `error`
 * (a CSR input that fails its checks: nothing is run). Calls on one model
 * must not overlap. */
int smlir_run(smlir_model *model, const smlir_tensor *inputs, int num_inputs, smlir_tensor *output, char *error,
              size_t error_size);

/* The call number the next run passes (models with random-fraction
 * sparsifiers draw a new mask per call; 0 after loading). */
void smlir_set_call_number(smlir_model *model, int64_t call);

#ifdef __cplusplus
}
#endif

#endif /* SPARSE_MLIR_H */
