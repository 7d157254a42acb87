#pragma once
// peer_read and allgather over the device peer table of a symmetric CUDA_VMM buffer: one thread per output
// element in a grid-stride loop. Every peer access is preceded by the rank check against the world size; a rank
// outside it raises the error flag and touches nothing, so a bad PE is an error, never an access.
//
// REQUIRES (checked on the host before launch): the call passed check_builtin with the chip's peer table; the
// table holds `world` addresses of mapped copies, each covering the buffer's nbytes.

#include "worker/cuda/elementwise.cuh"

namespace canopy::worker::cuda_kernels {

// Raises the flag once; the host reads it after the stream synchronizes.
__device__ __forceinline__ void raise_pe_error(const cuda_abi::PeerParams& p) {
    atomicExch(reinterpret_cast<unsigned*>(p.error), 1u);
}

template <class Bits>
__device__ void peer_read_body(const cuda_abi::PeerParams& p) {
    if (p.pe >= p.world) {
        if (first_index() == 0) {
            raise_pe_error(p);
        }
        return;
    }
    const std::uint64_t base = reinterpret_cast<const std::uint64_t*>(p.table)[p.pe];
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        store<Bits>(element_address(p.out, i), load<Bits>(base + element_address(p.src, i)));
    }
}

// out[r*n + i] = rank r's S[i], with n = src.count.
template <class Bits>
__device__ void allgather_body(const cuda_abi::PeerParams& p) {
    const std::uint64_t n = p.src.count;
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        const std::uint64_t rank = i / n;
        if (rank >= p.world) {
            raise_pe_error(p);
            return;
        }
        const std::uint64_t base = reinterpret_cast<const std::uint64_t*>(p.table)[rank];
        store<Bits>(element_address(p.out, i), load<Bits>(base + element_address(p.src, i % n)));
    }
}

} // namespace canopy::worker::cuda_kernels
