// A user module for the [gpu] tests of user modules and for bench_gpu_dispatch: compiled to PTX at build time
// (nvcc -ptx) and embedded as text, then loaded with `module load` like any user's module. Every kernel is
// extern "C" so that NAME:function names it. Arithmetic is exact on the values the tests use.

// y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void saxpy(float* y, const float* x, float a, long long n) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
    }
}

// A scalar before a tensor: x[i] = a * x[i] for i < n.
extern "C" __global__ void scale_first(double a, double* x, long long n) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = __dmul_rn(a, x[i]);
    }
}

extern "C" __global__ void empty() {}

// At most 128 threads per block: a launch of more is refused by the chip (the function's own limit).
extern "C" __global__ void __launch_bounds__(128) bounded(int* out) {
    out[threadIdx.x] = static_cast<int>(threadIdx.x);
}

// Copies n ints through dynamic shared memory (one block; n <= the shared bytes / 4 and <= blockDim.x * 64).
extern "C" __global__ void shared_copy(int* out, const int* in, long long n) {
    extern __shared__ int staging[];
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        staging[i] = in[i] + 1;
    }
    __syncthreads();
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        out[i] = staging[i];
    }
}

// 4 KiB of static shared memory: with the full 227 KiB of dynamic shared memory it exceeds the device's limit.
extern "C" __global__ void static_shared(int* out) {
    __shared__ int scratch[1024];
    scratch[threadIdx.x] = static_cast<int>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = scratch[1023 - threadIdx.x];
}
