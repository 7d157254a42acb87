// peer_read and allgather: reads of other ranks' copies of a symmetric buffer through the peer table.
//
// Rank r's copy of a view S is S's byte_offset, shapes and strides applied to bases[r]. Every copy of a
// symmetric buffer has the same nbytes, so a view valid on one copy is valid on all of them.
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"
#include "worker/kernels/detail/strided.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace canopy::kernels::detail {
namespace {

// KERNEL_FAILED unless the table describes a world of at least one rank that contains my_rank.
std::uint64_t checked_world(const KernelCall& call) {
    const PeerTable& peers = *call.peers;
    if (peers.bases.empty()) {
        fail(ErrorCode::KERNEL_FAILED, call, "peer table is empty");
    }
    if (peers.my_rank >= peers.bases.size()) {
        fail(ErrorCode::KERNEL_FAILED, call,
             "peer table: my_rank " + std::to_string(peers.my_rank) + " is outside a world of " +
                 std::to_string(peers.bases.size()));
    }
    return peers.bases.size();
}

// Copies the i-th element of `src` (over src_base) to the i-th element of `out`, i ascending.
void copy_view(std::byte* src_base, const Tensor& src, const BoundTensor& out) {
    const std::size_t size = element_size(src.dtype);
    for_each_element_pair(src_base, src, out.base, *out.view,
                          [size](std::byte* s, std::byte* d) { std::memcpy(d, s, size); });
}

} // namespace

void check_peer_read(const KernelCall& call) {
    expect_same_dtype(call, 1, 0);
    expect_same_count(call, 1, 0);
    const std::int64_t pe = call.scalars[0].as_i64();
    if (call.peers == nullptr) {
        if (pe < 0) {
            fail(ErrorCode::PE_OUT_OF_RANGE, call, "pe " + std::to_string(pe) + " is out of range");
        }
        return;
    }
    const std::uint64_t world = checked_world(call);
    if (pe < 0 || static_cast<std::uint64_t>(pe) >= world) {
        fail(ErrorCode::PE_OUT_OF_RANGE, call,
             "pe " + std::to_string(pe) + " is out of range for a world of " + std::to_string(world));
    }
}

void run_peer_read(const KernelCall& call) {
    const auto pe = static_cast<std::size_t>(call.scalars[0].as_i64());
    copy_view(call.peers->bases[pe], *call.tensors[0].view, call.tensors[1]);
}

void check_allgather(const KernelCall& call) {
    expect_same_dtype(call, 1, 0);
    if (call.peers == nullptr) {
        return;
    }
    const std::uint64_t world = checked_world(call);
    const std::uint64_t n = count_of(call, 0);
    std::uint64_t expected = 0;
    if (__builtin_mul_overflow(world, n, &expected)) {
        expected = UINT64_MAX; // no view has that many elements, so the check below refuses it
    }
    expect_count(call, 1, expected,
                 "must have world * n = " + std::to_string(world) + " * " + std::to_string(n) + " = " +
                     std::to_string(expected));
}

// out[r*n + i] = rank r's S[i]: one cursor walks out in row-major order across all ranks.
void run_allgather(const KernelCall& call) {
    const Tensor& s = *call.tensors[0].view;
    const BoundTensor& out = call.tensors[1];
    const std::size_t size = element_size(s.dtype);
    ElementCursor dst(out.base, byte_layout(*out.view));
    for (std::byte* rank_base : call.peers->bases) {
        for_each_element(rank_base, s, [&](std::byte* src) {
            std::memcpy(dst.address(), src, size);
            dst.next();
        });
    }
}

void check_peer_bases(const KernelCall& call) {
    const std::span<std::byte* const> bases = call.peers->bases;
    std::vector<std::pair<std::byte*, std::size_t>> sorted;
    sorted.reserve(bases.size());
    for (std::size_t r = 0; r < bases.size(); ++r) {
        if (bases[r] == nullptr) {
            fail(ErrorCode::KERNEL_FAILED, call, "peer table: bases[" + std::to_string(r) + "] is null");
        }
        sorted.emplace_back(bases[r], r);
    }
    // std::less orders unrelated pointers totally, where the built-in < does not.
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& x, const auto& y) { return std::less<std::byte*>()(x.first, y.first); });
    for (std::size_t i = 1; i < sorted.size(); ++i) {
        if (sorted[i].first == sorted[i - 1].first) {
            fail(ErrorCode::KERNEL_FAILED, call,
                 "peer table: bases[" + std::to_string(sorted[i].second) + "] equals bases[" +
                     std::to_string(sorted[i - 1].second) + "]");
        }
    }
    const std::byte* own = call.tensors[0].base;
    if (own != nullptr && bases[call.peers->my_rank] != own) {
        fail(ErrorCode::KERNEL_FAILED, call,
             "peer table: bases[" + std::to_string(call.peers->my_rank) + "] (my_rank) is not the mapping of args[0]");
    }
}

} // namespace canopy::kernels::detail
