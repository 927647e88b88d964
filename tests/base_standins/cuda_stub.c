/* The CUDA driver *stub* of the stand-in bases: what the official images register in the loader's
 * cache with /etc/ld.so.conf.d/z-cuda-stubs.conf (tensorflow/build, tensorflow_runtime_dockerfiles/
 * setup.cuda.sh: `ln -s /usr/local/cuda/lib64/stubs/libcuda.so .../libcuda.so.1`, then ldconfig).
 *
 * NVIDIA's stub (package cuda-driver-dev-X-Y) exists so that programs link; every entry point
 * answers CUDA_ERROR_STUB_LIBRARY (34), "the CUDA driver is a stub library". Without a GPU and
 * the NVIDIA runtime, TensorFlow's dlopen("libcuda.so.1") therefore finds this file, and cuInit()
 * fails with 34 instead of "no libcuda". A real driver (the NVIDIA container runtime mounts it and
 * updates the cache), or the tests' fake driver on LD_LIBRARY_PATH, comes first.
 *
 * Only the calls TensorFlow makes before it gives up are defined; all return 34. */

#define CUDA_ERROR_STUB_LIBRARY 34

typedef int CUresult;

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_STUB_LIBRARY; }
CUresult cuDriverGetVersion(int *version) { (void)version; return CUDA_ERROR_STUB_LIBRARY; }
CUresult cuDeviceGetCount(int *count) { (void)count; return CUDA_ERROR_STUB_LIBRARY; }
CUresult cuDeviceGet(int *device, int ordinal) {
    (void)device; (void)ordinal; return CUDA_ERROR_STUB_LIBRARY;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
    (void)error;
    if (text) *text = "CUDA driver is a stub library";
    return 0;
}
CUresult cuGetErrorName(CUresult error, const char **text) {
    (void)error;
    if (text) *text = "CUDA_ERROR_STUB_LIBRARY";
    return 0;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)symbol; (void)version; (void)flags;
    if (pfn) *pfn = 0;
    return CUDA_ERROR_STUB_LIBRARY;
}
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             void *status) {
    (void)symbol; (void)version; (void)flags; (void)status;
    if (pfn) *pfn = 0;
    return CUDA_ERROR_STUB_LIBRARY;
}
