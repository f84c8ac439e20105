/* Runs a package through the relax runtime's C API: prints its signature,
 * fills every input with a fixed pattern, runs, and prints each output's
 * shape and the sum of its elements.
 *
 *   run_model PKG [NAME=VALUE ...]      symbolic dims' values (batch=2 ...)
 *
 * Input k, element i: f32/f64 ((7 i + k) % 13) / 13 - 0.5; integers
 * (7 i + k) % 13; bool i % 2. Exit status 0, or 1 with the runtime's
 * message on standard error. */
#include <relax/relax_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what) {
  fprintf(stderr, "run_model: %s: %s\n", what, relax_last_error());
  return 1;
}

/* The value of dim text `d`: a number, or NAME given as NAME=VALUE. */
static int dim_value(const char* d, int argc, char** argv, int64_t* out) {
  char* end;
  long long v = strtoll(d, &end, 10);
  if (*d && !*end) return *out = v, 0;
  size_t n = strlen(d);
  for (int a = 2; a < argc; ++a)
    if (strncmp(argv[a], d, n) == 0 && argv[a][n] == '=') return *out = strtoll(argv[a] + n + 1, NULL, 10), 0;
  fprintf(stderr, "run_model: give the dim '%s' as %s=VALUE\n", d, d);
  return 1;
}

static size_t dtype_bytes(const char* t) {
  if (!strcmp(t, "f64") || !strcmp(t, "i64")) return 8;
  if (!strcmp(t, "f32") || !strcmp(t, "i32")) return 4;
  if (!strcmp(t, "f16") || !strcmp(t, "bf16") || !strcmp(t, "i16")) return 2;
  if (!strcmp(t, "i8") || !strcmp(t, "u8") || !strcmp(t, "bool")) return 1;
  return 0;
}

static double element(const relax_tensor* t, int64_t i) {
  const char* d = t->dtype;
  if (!strcmp(d, "f32")) return ((const float*)t->data)[i];
  if (!strcmp(d, "f64")) return ((const double*)t->data)[i];
  if (!strcmp(d, "i64")) return (double)((const int64_t*)t->data)[i];
  if (!strcmp(d, "i32")) return ((const int32_t*)t->data)[i];
  if (!strcmp(d, "i8")) return ((const int8_t*)t->data)[i];
  if (!strcmp(d, "u8") || !strcmp(d, "bool")) return ((const uint8_t*)t->data)[i];
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: run_model PKG [NAME=VALUE ...]\n");
    return 1;
  }
  printf("%s\n", relax_version());
  relax_model* m = relax_model_load(argv[1], 0);
  if (!m) return fail(argv[1]);
  int32_t n = relax_model_num_inputs(m);
  relax_tensor* in = calloc((size_t)n, sizeof *in);
  int64_t** shapes = calloc((size_t)n, sizeof *shapes);
  int status = 0;
  for (int32_t k = 0; k < n && !status; ++k) {
    const char *name, *dtype;
    int32_t ndim;
    const char* const* dims;
    relax_model_input(m, k, &name, &dtype, &ndim, &dims);
    printf("input %s %s [", name, dtype);
    shapes[k] = calloc((size_t)ndim + 1, sizeof(int64_t));
    int64_t count = 1;
    for (int32_t d = 0; d < ndim && !status; ++d) {
      printf("%s%s", d ? ", " : "", dims[d]);
      status = dim_value(dims[d], argc, argv, &shapes[k][d]);
      count *= shapes[k][d];
    }
    printf("]\n");
    size_t size = dtype_bytes(dtype);
    if (!size) {
      fprintf(stderr, "run_model: input %s: this example does not fill %s\n", name, dtype);
      status = 1;
      break;
    }
    // A negative dim is passed on as given: relax_model_run refuses it by name.
    char* data = malloc(count > 0 ? (size_t)count * size : 1);
    if (!data) {
      fprintf(stderr, "run_model: input %s: no memory for %lld elements\n", name, (long long)count);
      status = 1;
      break;
    }
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = (7 * i + k) % 13;
      if (!strcmp(dtype, "f32")) ((float*)data)[i] = (float)v / 13.0f - 0.5f;
      else if (!strcmp(dtype, "f64")) ((double*)data)[i] = (double)v / 13.0 - 0.5;
      else if (!strcmp(dtype, "i64")) ((int64_t*)data)[i] = v;
      else if (!strcmp(dtype, "i32")) ((int32_t*)data)[i] = (int32_t)v;
      else if (!strcmp(dtype, "bool")) ((uint8_t*)data)[i] = (uint8_t)(i % 2);
      else memset(data + i * size, (int)v, size);
    }
    in[k] = (relax_tensor){dtype, ndim, shapes[k], data};
  }
  relax_result* r = status ? NULL : relax_model_run(m, in, n);
  if (!status && !r) status = fail("run");
  for (int32_t i = 0; r && i < relax_result_count(r); ++i) {
    relax_tensor t;
    const char* name;
    relax_model_output(m, i, &name, NULL, NULL, NULL);
    relax_result_get(r, i, &t);
    int64_t count = 1;
    printf("output %s %s [", name, t.dtype);
    for (int32_t d = 0; d < t.ndim; ++d) {
      printf("%s%lld", d ? ", " : "", (long long)t.shape[d]);
      count *= t.shape[d];
    }
    double sum = 0;
    for (int64_t e = 0; e < count; ++e) sum += element(&t, e);
    printf("] sum %.9g\n", sum);
  }
  relax_result_free(r);
  for (int32_t k = 0; k < n; ++k) {
    free((void*)in[k].data);
    free(shapes[k]);
  }
  free(in);
  free(shapes);
  relax_model_free(m);
  return status;
}
