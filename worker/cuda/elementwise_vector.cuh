#pragma once
// fill, iota, copy, scale and axpy over a contiguous written view, with 16-byte loads and stores: the entry points
// canopy_KERNEL_vector_DTYPE. The host takes them when the written view is cuda_math::vectorizable; every other
// view goes to the strided kernels of elementwise.cuh.
//
// The written view is cut at 16-byte boundaries (cuda_math::vector_split). Thread t of T writes head element t and
// tail element tail_start + t when they exist, and the whole vectors t, t + T, t + 2T, ...: VECTOR_UNROLL vectors
// loaded at a time, then computed and stored. The read view of copy and axpy comes in the same 16-byte vectors when
// cuda_math::vectors_pair holds, else element by element through element_address (any strides). Each element is
// computed by the same Ops operation as in the strided kernels, from the same operands, so the bits are those of
// the strided kernels and of the CPU.
//
// REQUIRES (checked on the host before launch): as for elementwise.cuh, and cuda_math::vectorizable(p.out).

#include "worker/cuda/elementwise.cuh"

namespace canopy::worker::cuda_kernels {

inline constexpr unsigned VECTOR_UNROLL = cuda_abi::ELEMENTWISE_VECTOR_UNROLL;

// The elements of one 16-byte vector, in address order, and its bits as one uint4: loads and stores move the uint4,
// so that each is one 16-byte access.
template <class V>
union Lanes {
    static constexpr unsigned N = 16 / sizeof(V);
    uint4 raw;
    V e[N];
};

// REQUIRES: address is a multiple of 16.
template <class V>
__device__ __forceinline__ Lanes<V> load_lanes(std::uint64_t address) {
    Lanes<V> lanes;
    lanes.raw = *reinterpret_cast<const uint4*>(address);
    return lanes;
}

template <class V>
__device__ __forceinline__ void store_lanes(std::uint64_t address, const Lanes<V>& lanes) {
    *reinterpret_cast<uint4*>(address) = lanes.raw;
}

// Where the written view's parts lie: element i at origin + i * SIZE, vector j at body + 16 * j.
template <class V>
struct Written {
    std::uint64_t origin;
    std::uint64_t body;
    std::uint64_t first; // logical index of the first element of vector 0 (the head's length)
    __device__ std::uint64_t element(std::uint64_t i) const { return origin + i * sizeof(V); }
    __device__ std::uint64_t vector(std::uint64_t j) const { return body + 16 * j; }
    __device__ std::uint64_t index(std::uint64_t j) const { return first + j * Lanes<V>::N; }
};

// Reads the read view of copy and axpy: as vectors that coincide with the written ones (Paired), or element by
// element at the logical indices of the written vector. `view` points at the kernel's parameter: a copy would put
// the view, whose dimensions element_address indexes at run time, in local memory.
template <class V, bool Paired>
struct Source {
    const cuda_abi::DeviceView* view;
    std::uint64_t body; // Paired: where the read view's vector 0 starts
    __device__ Lanes<V> vector(const Written<V>& out, std::uint64_t j) const {
        if constexpr (Paired) {
            return load_lanes<V>(body + 16 * j);
        } else {
            Lanes<V> lanes;
            const std::uint64_t first = out.index(j);
#pragma unroll
            for (unsigned q = 0; q < Lanes<V>::N; ++q) {
                lanes.e[q] = load<V>(element_address(*view, first + q));
            }
            return lanes;
        }
    }
    __device__ V element(std::uint64_t i) const {
        return load<V>(element_address(*view, i));
    }
};

// Runs kernel `k` over the written view `out`. K provides State, fetch(j) -> State (the reads of vector j),
// finish(j, State) (compute and store vector j) and element(i) (the whole work for element i).
template <class V, class K>
__device__ __forceinline__ void run_vectors(const cuda_abi::DeviceView& out, const K& k) {
    const cuda_math::VectorSplit split = cuda_math::vector_split(out.origin, out.count, sizeof(V));
    const std::uint64_t threads = grid_stride();
    const std::uint64_t t = first_index();
    if (t < split.head) {
        k.element(t);
    }
    if (t < out.count - split.tail_start) {
        k.element(split.tail_start + t);
    }
    std::uint64_t j = t;
    for (; j + (VECTOR_UNROLL - 1) * threads < split.vectors; j += VECTOR_UNROLL * threads) {
        typename K::State s[VECTOR_UNROLL];
#pragma unroll
        for (unsigned u = 0; u < VECTOR_UNROLL; ++u) {
            s[u] = k.fetch(j + u * threads);
        }
#pragma unroll
        for (unsigned u = 0; u < VECTOR_UNROLL; ++u) {
            k.finish(j + u * threads, s[u]);
        }
    }
    for (; j < split.vectors; j += threads) {
        k.finish(j, k.fetch(j));
    }
}

template <class V>
__device__ __forceinline__ Written<V> written(const cuda_abi::DeviceView& out) {
    const cuda_math::VectorSplit split = cuda_math::vector_split(out.origin, out.count, sizeof(V));
    return {out.origin, out.origin + split.head * sizeof(V), split.head};
}

struct Nothing {};

template <class Ops>
struct FillVectors {
    using V = typename Ops::V;
    using State = Nothing;
    Written<V> out;
    V value;
    Lanes<V> values;
    __device__ State fetch(std::uint64_t) const { return {}; }
    __device__ void finish(std::uint64_t j, State) const { store_lanes<V>(out.vector(j), values); }
    __device__ void element(std::uint64_t i) const { store<V>(out.element(i), value); }
};

template <class Ops>
__device__ void fill_vector_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    FillVectors<Ops> k{written<V>(p.out), scalar_value<V>(p.scalar), {}};
#pragma unroll
    for (unsigned q = 0; q < Lanes<V>::N; ++q) {
        k.values.e[q] = k.value;
    }
    run_vectors<V>(p.out, k);
}

template <class Ops>
struct IotaVectors {
    using V = typename Ops::V;
    using State = Nothing;
    Written<V> out;
    __device__ State fetch(std::uint64_t) const { return {}; }
    __device__ void finish(std::uint64_t j, State) const {
        Lanes<V> lanes;
        const std::uint64_t first = out.index(j);
#pragma unroll
        for (unsigned q = 0; q < Lanes<V>::N; ++q) {
            lanes.e[q] = Ops::from_index(first + q);
        }
        store_lanes<V>(out.vector(j), lanes);
    }
    __device__ void element(std::uint64_t i) const {
        store<V>(out.element(i), Ops::from_index(i));
    }
};

template <class Ops>
__device__ void iota_vector_body(const cuda_abi::ElementwiseParams& p) {
    run_vectors<typename Ops::V>(p.out, IotaVectors<Ops>{written<typename Ops::V>(p.out)});
}

template <class Bits, bool Paired>
struct CopyVectors {
    using State = Lanes<Bits>;
    Written<Bits> out;
    Source<Bits, Paired> in;
    __device__ State fetch(std::uint64_t j) const { return in.vector(out, j); }
    __device__ void finish(std::uint64_t j, const State& s) const { store_lanes<Bits>(out.vector(j), s); }
    __device__ void element(std::uint64_t i) const { store<Bits>(out.element(i), in.element(i)); }
};

// The read view's vector 0 starts where the written view's does, relative to each origin.
template <class V>
__device__ __forceinline__ std::uint64_t paired_body(const cuda_abi::ElementwiseParams& p, const Written<V>& out) {
    return p.in.origin + (out.body - out.origin);
}

template <class Bits>
__device__ void copy_vector_body(const cuda_abi::ElementwiseParams& p) {
    const Written<Bits> out = written<Bits>(p.out);
    if (cuda_math::vectors_pair(p.out, p.in)) {
        run_vectors<Bits>(p.out, CopyVectors<Bits, true>{out, {&p.in, paired_body(p, out)}});
    } else {
        run_vectors<Bits>(p.out, CopyVectors<Bits, false>{out, {&p.in, 0}});
    }
}

template <class Ops>
struct ScaleVectors {
    using V = typename Ops::V;
    using State = Lanes<V>;
    Written<V> out;
    V a;
    __device__ State fetch(std::uint64_t j) const { return load_lanes<V>(out.vector(j)); }
    __device__ void finish(std::uint64_t j, State s) const {
#pragma unroll
        for (unsigned q = 0; q < Lanes<V>::N; ++q) {
            s.e[q] = Ops::mul(a, s.e[q]);
        }
        store_lanes<V>(out.vector(j), s);
    }
    __device__ void element(std::uint64_t i) const {
        const std::uint64_t address = out.element(i);
        store<V>(address, Ops::mul(a, load<V>(address)));
    }
};

template <class Ops>
__device__ void scale_vector_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    run_vectors<V>(p.out, ScaleVectors<Ops>{written<V>(p.out), scalar_value<V>(p.scalar)});
}

// y = a*x + y as two roundings, as axpy_body.
template <class Ops, bool Paired>
struct AxpyVectors {
    using V = typename Ops::V;
    struct State {
        Lanes<V> x;
        Lanes<V> y;
    };
    Written<V> out;
    Source<V, Paired> in;
    V a;
    __device__ State fetch(std::uint64_t j) const { return {in.vector(out, j), load_lanes<V>(out.vector(j))}; }
    __device__ void finish(std::uint64_t j, State s) const {
#pragma unroll
        for (unsigned q = 0; q < Lanes<V>::N; ++q) {
            s.y.e[q] = Ops::add(Ops::mul(a, s.x.e[q]), s.y.e[q]);
        }
        store_lanes<V>(out.vector(j), s.y);
    }
    __device__ void element(std::uint64_t i) const {
        const std::uint64_t y = out.element(i);
        const V product = Ops::mul(a, in.element(i));
        store<V>(y, Ops::add(product, load<V>(y)));
    }
};

template <class Ops>
__device__ void axpy_vector_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    const Written<V> out = written<V>(p.out);
    const V a = scalar_value<V>(p.scalar);
    if (cuda_math::vectors_pair(p.out, p.in)) {
        run_vectors<V>(p.out, AxpyVectors<Ops, true>{out, {&p.in, paired_body(p, out)}, a});
    } else {
        run_vectors<V>(p.out, AxpyVectors<Ops, false>{out, {&p.in, 0}, a});
    }
}

} // namespace canopy::worker::cuda_kernels
