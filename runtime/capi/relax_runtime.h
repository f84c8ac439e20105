/* The relax runtime's C API: load a package (*.rpkg) that relax-build
 * wrote, look at its signature, run it.
 *
 * Installed as <relax/relax_runtime.h> with librelax_runtime.so; find it
 * with CMake (find_package(RelaxRuntime), target Relax::runtime) or
 * pkg-config (relax-runtime). examples/embed/run_model.c uses all of it.
 *
 * Conventions: a call that fails returns NULL (or a non-zero int) and
 * leaves a message in relax_last_error() (per thread), naming the package,
 * the input and the dim where that is what went wrong. Nothing here throws
 * or aborts. relax_model_run may be called on one model from many threads
 * at once: a cpu model runs the calls side by side, each on state of its
 * own over the one copy of the weights (made the first time that many
 * calls overlap, then kept); a vulkan or cuda model runs them one at a
 * time. The other calls on a model only read it; relax_model_free must
 * come after every call on it has returned. Tensors are dense and
 * row-major; dtypes are named as the package names them ("f32", "f16",
 * "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "bool", ...).
 */
#ifndef RELAX_RUNTIME_H
#define RELAX_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RELAX_RUNTIME_API_VERSION 1

#if defined(__GNUC__)
#define RELAX_API __attribute__((visibility("default")))
#else
#define RELAX_API
#endif

typedef struct relax_model relax_model;
typedef struct relax_result relax_result;

/* A tensor: an input the caller owns, or an output the result owns. */
typedef struct relax_tensor {
  const char* dtype;
  int32_t ndim;
  const int64_t* shape; /* ndim dims */
  const void* data;     /* the elements, row-major */
} relax_tensor;

/* "relax 0.1.0". */
RELAX_API const char* relax_version(void);
/* The message of this thread's last failed call ("" when none). */
RELAX_API const char* relax_last_error(void);

/* Opens and checks a package. A vulkan package runs on Vulkan device
 * `device` (relax-run --list-devices numbers them); cpu packages ignore
 * it. NULL on error. */
RELAX_API relax_model* relax_model_load(const char* path, int32_t device);
RELAX_API void relax_model_free(relax_model* model);

RELAX_API int32_t relax_model_num_inputs(const relax_model* model);
RELAX_API int32_t relax_model_num_outputs(const relax_model* model);
/* Input (or output) i: its name, dtype and dims, each dim as text: a
 * number ("64"), a symbolic name ("batch") or an expression
 * ("past_sequence_length + sequence_length"). The strings live as long as
 * the model. 0 on success, non-zero when i is out of range. */
RELAX_API int relax_model_input(const relax_model* model, int32_t i, const char** name, const char** dtype,
                                int32_t* ndim, const char* const** dims);
RELAX_API int relax_model_output(const relax_model* model, int32_t i, const char** name, const char** dtype,
                                 int32_t* ndim, const char* const** dims);

/* Runs the model on `num_inputs` inputs in signature order. The inputs'
 * data is copied; the caller may free it after the call. NULL on error
 * (a wrong count, dtype, rank or dim: the message names the input). */
RELAX_API relax_result* relax_model_run(relax_model* model, const relax_tensor* inputs, int32_t num_inputs);

/* The most bytes the runtime's tensors may hold at once, all models of
 * the process together: a run that would pass it fails (NULL, and a
 * message naming the tensor and the bytes) instead of exhausting the
 * machine. Default: $RELAX_MAX_MEMORY (bytes, or with a K, M, G or T
 * suffix) if set, else the machine's physical memory. */
RELAX_API void relax_set_max_memory(uint64_t bytes);

RELAX_API int32_t relax_result_count(const relax_result* result);
/* Output i of a run, valid until relax_result_free. 0 on success. */
RELAX_API int relax_result_get(const relax_result* result, int32_t i, relax_tensor* out);
RELAX_API void relax_result_free(relax_result* result);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_RUNTIME_H */
