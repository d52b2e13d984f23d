/* Runs an exported model with CSR inputs from C, several calls on one load
 * (test_csr_input_c_loader.py builds and drives it):
 *
 *   run_csr_model <artifact> <output prefix> <input files> [-- <input files>]...
 *
 * Each group of input files is one call, written to <prefix>.<call>.bin. A
 * dense input's file holds its row-major data; a CSR input's holds int64
 * nnz, then positions (rows + 1), coordinates (nnz) and values (nnz) in
 * the input's dtypes (smlir_input_csr). A call smlir_run refuses prints its
 * message as "call <k>: <message>" and the program goes on; the exit status
 * is 0 when every call ran, 2 when one was refused, 1 on a usage or I/O error. */

#include "sparse_mlir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *data = malloc(n > 0 ? (size_t)n : 1);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <artifact> <output prefix> <input files> [-- <input files>]...\n", argv[0]);
    return 1;
  }
  char error[1024];
  smlir_model *model = smlir_load(argv[1], error, sizeof error);
  if (!model) {
    fprintf(stderr, "load: %s\n", error);
    return 1;
  }
  int n = smlir_num_inputs(model), status = 0, call = 0;
  smlir_tensor *inputs = calloc((size_t)n, sizeof *inputs);
  smlir_csr *csr = calloc((size_t)n, sizeof *csr);
  void **files = calloc((size_t)n, sizeof *files);
  smlir_tensor output;
  smlir_output_spec(model, &output);
  size_t output_bytes = smlir_num_elements(&output) * smlir_dtype_size(output.dtype);
  output.data = malloc(output_bytes);
  for (int arg = 3; arg <= argc; ++call) {
    int count = 0;
    for (; arg < argc && strcmp(argv[arg], "--"); ++arg, ++count) {
      if (count >= n) {
        fprintf(stderr, "call %d: more than %d input files\n", call, n);
        return 1;
      }
      size_t size;
      files[count] = read_file(argv[arg], &size);
      if (!files[count]) {
        fprintf(stderr, "call %d: cannot read %s\n", call, argv[arg]);
        return 1;
      }
      smlir_input_spec(model, count, &inputs[count]);
      int32_t pos_dtype, crd_dtype;
      if (smlir_input_csr(model, count, &pos_dtype, &crd_dtype) == 1) {
        char *p = files[count];
        memcpy(&csr[count].nnz, p, sizeof(int64_t));
        size_t pos_bytes = (size_t)(inputs[count].shape[0] + 1) * smlir_dtype_size(pos_dtype);
        /* The file must hold what it claims: this program is not under test. */
        size_t nnz = csr[count].nnz > 0 ? (size_t)csr[count].nnz : 0;
        if (size < 8 + pos_bytes + nnz * (smlir_dtype_size(crd_dtype) + sizeof(float))) {
          fprintf(stderr, "call %d: %s is shorter than its nnz says\n", call, argv[arg]);
          return 1;
        }
        csr[count].positions = p + 8;
        csr[count].coordinates = p + 8 + pos_bytes;
        csr[count].values = (const float *)(p + 8 + pos_bytes + nnz * smlir_dtype_size(crd_dtype));
        inputs[count].data = &csr[count];
      } else {
        inputs[count].data = files[count];
      }
    }
    ++arg;   /* past "--" (or the end) */
    if (smlir_run(model, inputs, count, &output, error, sizeof error)) {
      fprintf(stderr, "call %d: %s\n", call, error);
      status = 2;
    } else {
      char path[4096];
      snprintf(path, sizeof path, "%s.%d.bin", argv[2], call);
      FILE *f = fopen(path, "wb");
      if (!f || fwrite(output.data, 1, output_bytes, f) != output_bytes) {
        fprintf(stderr, "call %d: cannot write %s\n", call, path);
        return 1;
      }
      fclose(f);
    }
    for (int i = 0; i < count; ++i)
      free(files[i]);
  }
  free(output.data);
  free(files);
  free(csr);
  free(inputs);
  smlir_free(model);
  return status;
}
