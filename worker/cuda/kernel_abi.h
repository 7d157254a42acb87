#pragma once
// The parameters of canopy's CUDA kernels (worker/cuda/kernels.cu), shared by the host code that fills them
// (launcher.cpp, compiled by the C++ compiler) and the device code that reads them (compiled by nvcc). Each
// kernel takes exactly one of these structs, by value. Plain fixed-width fields with explicit padding, so both
// compilers lay them out alike; the sizes are pinned below.
//
// Kernel names: "canopy_KERNEL_DTYPE" with DTYPE as protocol's to_string(DataType) ("canopy_axpy_bfloat16"),
// for fill, iota, copy, scale, axpy (any views), fill_vector, iota_vector, copy_vector, scale_vector,
// axpy_vector (a written view that cuda_math::vectorizable takes; 16-byte loads and stores), reduce_partial,
// reduce_dense and reduce_finish (every dtype), matmul (float dtypes); "canopy_peer_read_bN" and "canopy_allgather_bN"
// for element sizes N = 1, 2, 4, 8; plus "canopy_illegal_address".
//
// Thread safety: plain values.

#include <cstdint>

namespace canopy::worker::cuda_abi {

inline constexpr unsigned MAX_VIEW_DIMS = 8;

// A view in device bytes, as kernels::detail::ByteLayout makes it: size-1 dimensions dropped and mergeable
// ones merged, so a dense view is one dimension whose stride is the element size. Element i of the view (in
// row-major logical order) lies at origin + Σ index_d · strides[d], where index is i unravelled over shapes
// (the last dimension fastest).
struct DeviceView {
    std::uint64_t origin; // device address of element 0: the buffer's device base + the view's byte_offset
    std::uint64_t count;  // elements
    std::uint32_t ndims;  // 1..MAX_VIEW_DIMS
    std::uint32_t element_size;
    std::uint64_t shapes[MAX_VIEW_DIMS];
    std::uint64_t strides[MAX_VIEW_DIMS]; // bytes
};
static_assert(sizeof(DeviceView) == 152);

// fill(out, value), iota(out), copy(in, out), scale(x = out, a = scalar), axpy(in = x, out = y, a = scalar);
// the same for their _vector entry points.
struct ElementwiseParams {
    DeviceView out;       // the written view (scale's x, axpy's y)
    DeviceView in;        // the read view (copy's in, axpy's x); unused otherwise
    std::uint64_t scalar; // fill's value or the factor a, already converted to the dtype: its bits, low-aligned
};
static_assert(sizeof(ElementwiseParams) == 312);

// reduce_sum (reduce.cuh): reduce_partial (any view) or reduce_dense (a contiguous view) writes one sum per block
// to partials[blockIdx.x] in the accumulator of the dtype (double for floats, wrapping uint64 for integers), on
// a grid of partial_count blocks of REDUCE_BLOCK threads; then reduce_finish (one block) adds the partial_count
// partials and stores the sum, converted to the dtype, into *y.
struct ReduceParams {
    DeviceView x;
    std::uint64_t y;        // device address of the output element
    std::uint64_t partials; // device address of partial_count 8-byte slots (double or uint64)
    std::uint32_t partial_count;
    std::uint32_t reserved;
};
static_assert(sizeof(ReduceParams) == 176);

// A 2-D view: element (i, j) at origin + i·row_stride + j·col_stride (bytes).
struct MatrixView {
    std::uint64_t origin;
    std::uint64_t rows;
    std::uint64_t cols;
    std::uint64_t row_stride;
    std::uint64_t col_stride;
};
static_assert(sizeof(MatrixView) == 40);

// C[M,N] = A[M,K] · B[K,N]; each C element accumulates over k ascending (docs/kernels.md).
struct MatmulParams {
    MatrixView a;
    MatrixView b;
    MatrixView c;
};
static_assert(sizeof(MatmulParams) == 120);

// peer_read(in S, out, pe) and allgather(in S[n], out[world*n]) over a symmetric buffer. `src` is S relative to
// the start of a copy (origin = S's byte_offset); rank r's element i lies at table[r] + element_address(src, i).
// Before every peer access the kernel checks the rank against `world`; an out-of-range rank sets *error to 1
// and accesses nothing. Elements move as unsigned integers of element_size bytes (1, 2, 4 or 8).
struct PeerParams {
    DeviceView src;
    DeviceView out;
    std::uint64_t table; // device address of `world` uint64 device addresses, table[my rank] = the own copy
    std::uint64_t error; // device address of a uint32 flag, 0 before the launch
    std::uint32_t world;
    std::uint32_t pe; // peer_read: the rank read; allgather: unused
};
static_assert(sizeof(PeerParams) == 328);

// illegal_address: one thread stores to `address`, which no allocation covers.
struct FaultParams {
    std::uint64_t address;
};
static_assert(sizeof(FaultParams) == 8);

// Launch geometry the host and the kernels agree on.
inline constexpr unsigned ELEMENTWISE_BLOCK = 256;
// The strided element-wise kernels run on at most this many blocks (about 8 waves of 8 blocks per SM on an H200), one
// per ELEMENTWISE_BLOCK elements for shorter views; their grid-stride loops cover the rest.
inline constexpr unsigned ELEMENTWISE_GRID = 8192;
// The _vector element-wise kernels run on at most this many blocks: 8 blocks of ELEMENTWISE_BLOCK threads on each
// of an H200's 132 SMs is a full wave (2048 threads per SM), and the grid-stride loop covers the rest. Fewer for
// short views: one block per ELEMENTWISE_BLOCK vectors. Each thread keeps ELEMENTWISE_VECTOR_UNROLL 16-byte vectors
// in flight.
inline constexpr unsigned ELEMENTWISE_VECTOR_GRID = 8 * 132;
inline constexpr unsigned ELEMENTWISE_VECTOR_UNROLL = 4;
inline constexpr unsigned REDUCE_BLOCK = 256;
// reduce_sum's first pass runs on at most this many blocks: 4 resident blocks on each of an H200's 132 SMs (the
// kernels' launch bounds keep 4 resident), so the pass runs in one wave there. Fewer for short views: one block
// per REDUCE_BLOCK * REDUCE_UNROLL elements (reduce_partial) or 16-byte vectors (reduce_dense).
inline constexpr unsigned REDUCE_GRID = 4 * 132;
inline constexpr unsigned REDUCE_MIN_BLOCKS_PER_SM = 4;
inline constexpr unsigned REDUCE_UNROLL = 8;          // 16-byte loads in flight per thread of reduce_dense
inline constexpr unsigned REDUCE_MAX_PARTIALS = 1024; // slots of the partials buffer, >= REDUCE_GRID
inline constexpr unsigned MATMUL_TILE = 16;           // blocks are MATMUL_TILE x MATMUL_TILE threads

} // namespace canopy::worker::cuda_abi
