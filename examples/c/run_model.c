/* Runs an exported sparse_mlir model from C, without Python or MLIR.
 *
 *   python examples/deploy.py --out out         # writes out/mlp.smlir and out/input.bin
 *   cc -O2 -I$(python -c "import sparse_mlir.artifact as a; print(a.c_dir())") \
 *      examples/c/run_model.c $(python -c "import sparse_mlir.artifact as a; print(a.c_dir())")/sparse_mlir_runtime.c \
 *      -ldl -o run_model
 *   ./run_model out/mlp.smlir out/input.bin output.bin
 *
 * Inputs and the output are raw little-endian arrays in the model's dtypes
 * and static shapes (one file per input). With SMLIR_EXPECT_SHA256 set (the
 * hash published with the model), only that artifact is loaded.
 */
#define _POSIX_C_SOURCE 200809L
#include "sparse_mlir.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void print_spec(const char *what, const smlir_tensor *t) {
  static const char *names[] = {"?", "float32", "float64", "float16", "int8", "int16", "int32", "int64"};
  printf("%s: %s[", what, t->dtype >= 1 && t->dtype <= 7 ? names[t->dtype] : "?");
  for (int i = 0; i < t->rank; ++i)
    printf(i ? ", %lld" : "%lld", (long long)t->shape[i]);
  printf("]\n");
}

int main(int argc, char **argv) {
  char error[1024];
  if (argc < 3) {
    fprintf(stderr, "usage: %s ARTIFACT INPUT.bin... OUTPUT.bin\n", argv[0]);
    return 2;
  }
  double start = now_ms();
  smlir_model *model = smlir_load_expecting(argv[1], getenv("SMLIR_EXPECT_SHA256"), error, sizeof error);
  if (!model) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  double loaded = now_ms();
  int n = smlir_num_inputs(model);
  if (argc != n + 3) {
    fprintf(stderr, "error: the model takes %d inputs: pass %d input files and one output file\n", n, n);
    smlir_free(model);
    return 2;
  }
  smlir_tensor *inputs = calloc((size_t)n, sizeof *inputs);
  int status = 1;
  for (int i = 0; i < n; ++i) {
    smlir_input_spec(model, i, &inputs[i]);
    print_spec("input", &inputs[i]);
    size_t bytes = smlir_num_elements(&inputs[i]) * smlir_dtype_size(inputs[i].dtype);
    inputs[i].data = malloc(bytes);
    FILE *file = fopen(argv[2 + i], "rb");
    size_t got = file ? fread(inputs[i].data, 1, bytes, file) : 0;
    int extra = file && fgetc(file) != EOF;
    if (file)
      fclose(file);
    if (got != bytes || extra) {
      fprintf(stderr, "error: %s must hold exactly %zu bytes for input %d\n", argv[2 + i], bytes, i);
      goto done;
    }
  }
  smlir_tensor output;
  smlir_output_spec(model, &output);
  print_spec("output", &output);
  size_t out_bytes = smlir_num_elements(&output) * smlir_dtype_size(output.dtype);
  output.data = malloc(out_bytes);
  double run_start = now_ms();
  if (smlir_run(model, inputs, n, &output, error, sizeof error)) {
    fprintf(stderr, "error: %s\n", error);
    free(output.data);
    goto done;
  }
  double ran = now_ms();
  FILE *file = fopen(argv[argc - 1], "wb");
  if (!file || fwrite(output.data, 1, out_bytes, file) != out_bytes) {
    fprintf(stderr, "error: cannot write %s\n", argv[argc - 1]);
  } else {
    printf("load %.1f ms, first run %.1f ms, wrote %zu bytes to %s\n", loaded - start, ran - run_start, out_bytes,
           argv[argc - 1]);
    status = 0;
  }
  if (file)
    fclose(file);
  free(output.data);
done:
  for (int i = 0; i < n; ++i)
    free(inputs[i].data);
  free(inputs);
  smlir_free(model);
  return status;
}
