#pragma once
// Helpers shared by the scheduler tests: buffers and views, the scheduler's results as values, task arguments, a
// byte-set oracle, and a check for a WireError's exact code, field and message. Header-only; test code only.

#include "protocol/protocol.h"
#include "scheduler/scheduler.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace canopy::test {

// A valid identity; different `buffer_id` or `generation` name different buffers.
inline CanonicalIdentity sched_identity(std::uint64_t buffer_id = 1, std::uint32_t generation = 1) {
    CanonicalIdentity id{};
    for (std::size_t i = 0; i < id.owner_instance.size(); ++i) {
        id.owner_instance[i] = static_cast<std::uint8_t>(0x31 + 7 * i);
    }
    id.buffer_id = buffer_id;
    id.generation = generation;
    return id;
}

inline BufferDescriptor sched_buffer(std::uint64_t nbytes, std::uint64_t buffer_id = 1,
                                     Access access = Access::READWRITE, std::uint32_t generation = 1) {
    return make_posix_shm_descriptor(sched_identity(buffer_id, generation), nbytes, access, "canopy-sched-test");
}

// A float32 block of a row-major matrix with `cols` columns.
inline Tensor matrix_block(const BufferDescriptor& matrix, std::uint32_t cols, std::uint32_t row, std::uint32_t col,
                           std::uint32_t nrows, std::uint32_t ncols) {
    return make_tensor(matrix, DataType::FLOAT32, {nrows, ncols}, {cols, 1}, (std::uint64_t{row} * cols + col) * 4);
}

// Two 4096-byte buffers, and the first 1024 float32 of one of them.
inline const BufferDescriptor VEC = sched_buffer(4096, 1);
inline const BufferDescriptor OTHER = sched_buffer(4096, 2);
inline Tensor whole(const BufferDescriptor& b = VEC) {
    return make_tensor(b, DataType::FLOAT32, {1024});
}

using Ids = std::vector<scheduler::TaskId>;

// Every task `s` hands out now, in its order.
inline Ids pop_all(scheduler::Scheduler& s) {
    Ids out;
    while (const std::optional<scheduler::TaskId> id = s.pop_ready()) {
        out.push_back(*id);
    }
    return out;
}

// Completes `id`; the tasks that became ready.
inline Ids complete(scheduler::Scheduler& s, scheduler::TaskId id) {
    Ids now_ready;
    s.complete(id, now_ready);
    return now_ready;
}

// Fails `id` with `code`; the tasks failed with it, with their messages.
inline std::vector<scheduler::FailedTask> fail(scheduler::Scheduler& s, scheduler::TaskId id,
                                               ErrorCode code = ErrorCode::KERNEL_FAILED) {
    std::vector<scheduler::FailedTask> failed;
    s.fail(id, code, failed);
    return failed;
}

inline TensorArg in(const Tensor& t) {
    return {t, TensorTag::INPUT};
}
inline TensorArg out(const Tensor& t) {
    return {t, TensorTag::OUTPUT};
}
inline TensorArg inout(const Tensor& t) {
    return {t, TensorTag::INOUT};
}

// A view built field by field, without validation.
inline Tensor raw_view(const BufferDescriptor& buffer, DataType dtype, std::vector<std::uint32_t> shapes,
                       std::vector<std::uint32_t> strides, std::uint64_t byte_offset) {
    Tensor t{};
    t.buffer = buffer;
    t.dtype = dtype;
    t.byte_offset = byte_offset;
    t.ndims = static_cast<std::uint8_t>(shapes.size());
    for (std::size_t i = 0; i < shapes.size() && i < MAX_DIMS; ++i) {
        t.shapes[i] = shapes[i];
        t.strides[i] = strides[i];
    }
    return t;
}

// The bytes of a view of a buffer of at most 64 bytes, as a bit mask: the byte-set oracle.
inline std::uint64_t byte_mask(const Tensor& t) {
    const std::uint32_t elem = element_size(t.dtype);
    std::uint64_t mask = 0;
    std::vector<std::uint32_t> index(t.ndims, 0);
    for (;;) {
        std::uint64_t offset = t.byte_offset;
        for (std::size_t d = 0; d < t.ndims; ++d) {
            offset += std::uint64_t{index[d]} * t.strides[d] * elem;
        }
        for (std::uint32_t b = 0; b < elem; ++b) {
            REQUIRE(offset + b < 64);
            mask |= std::uint64_t{1} << (offset + b);
        }
        std::size_t d = t.ndims;
        while (d > 0 && ++index[d - 1] == t.shapes[d - 1]) {
            index[--d] = 0;
        }
        if (d == 0) {
            return mask;
        }
    }
}

// Runs `fn`, requires a WireError with exactly `code`, `field` and what() == "FIELD: " + `problem`.
template <class F>
void require_wire_error(F&& fn, ErrorCode code, const std::string& field, const std::string& problem) {
    try {
        fn();
    } catch (const WireError& e) {
        CHECK(e.code() == code);
        CHECK(e.field() == field);
        CHECK(std::string(e.what()) == field + ": " + problem);
        return;
    }
    FAIL("no WireError was thrown");
}

} // namespace canopy::test
