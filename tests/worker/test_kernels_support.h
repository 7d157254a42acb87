#pragma once
// Fake mappings and call builders shared by the kernel tests. A FakeBuffer's bytes stand in for a worker's
// mapping of a POSIX_SHM buffer of the same size; its descriptor carries a dummy identity.

#include "protocol/descriptor.h"
#include "protocol/task_args.h"
#include "protocol/tensor.h"
#include "worker/kernels/builtin.h"

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace canopy::kernels::test {

inline BufferDescriptor fake_descriptor(std::uint64_t nbytes, std::uint64_t buffer_id = 1) {
    CanonicalIdentity id{};
    id.owner_instance[0] = 0x5A;
    id.buffer_id = buffer_id;
    id.generation = 1;
    return make_posix_shm_descriptor(id, nbytes, Access::READWRITE, "canopy-kernel-test");
}

// Heap bytes in place of a mapping; operator new aligns them for every element type. Filled with `fill_byte`
// so that untouched elements are recognizable.
class FakeBuffer {
public:
    explicit FakeBuffer(std::size_t nbytes, std::byte fill_byte = std::byte{0xEE}, std::uint64_t buffer_id = 1)
        : desc_(fake_descriptor(nbytes, buffer_id)), bytes_(nbytes, fill_byte) {}

    const BufferDescriptor& desc() const { return desc_; }
    std::byte* base() { return bytes_.data(); }
    const std::vector<std::byte>& bytes() const { return bytes_; }

    // The element of type T at element index `index` (byte offset index * sizeof(T)).
    template <class T>
    T get(std::size_t index) const {
        T v;
        std::memcpy(&v, bytes_.data() + index * sizeof(T), sizeof(T));
        return v;
    }
    template <class T>
    void set(std::size_t index, T v) {
        std::memcpy(bytes_.data() + index * sizeof(T), &v, sizeof(T));
    }

private:
    BufferDescriptor desc_;
    std::vector<std::byte> bytes_;
};

// A validated view with runtime shapes; empty strides mean row-major.
inline Tensor make_view(const FakeBuffer& buffer, DataType dtype, const std::vector<std::uint32_t>& shapes,
                        const std::vector<std::uint32_t>& strides = {}, std::uint64_t byte_offset = 0) {
    Tensor t = make_tensor(buffer.desc(), dtype, {1});
    t.ndims = static_cast<std::uint8_t>(shapes.size());
    t.byte_offset = byte_offset;
    std::uint64_t row_major = 1;
    for (std::size_t i = shapes.size(); i-- > 0;) {
        t.shapes[i] = shapes[i];
        t.strides[i] = strides.empty() ? static_cast<std::uint32_t>(row_major) : strides[i];
        row_major *= shapes[i];
    }
    validate_tensor(t);
    return t;
}

// Owns everything a KernelCall points to. Not copyable: the call points into it.
class CallBuilder {
public:
    explicit CallBuilder(std::string name) : name_(std::move(name)) {}
    CallBuilder(const CallBuilder&) = delete;
    CallBuilder& operator=(const CallBuilder&) = delete;

    CallBuilder& tensor(const Tensor& view, TensorTag tag, std::byte* base) {
        views_.push_back(view);
        bound_.push_back(BoundTensor{&views_.back(), tag, base});
        return *this;
    }
    CallBuilder& in(const Tensor& view, FakeBuffer& b) { return tensor(view, TensorTag::INPUT, b.base()); }
    CallBuilder& out(const Tensor& view, FakeBuffer& b) { return tensor(view, TensorTag::OUTPUT, b.base()); }
    CallBuilder& inout(const Tensor& view, FakeBuffer& b) { return tensor(view, TensorTag::INOUT, b.base()); }
    CallBuilder& scalar(ScalarArg s) {
        scalars_.push_back(s);
        return *this;
    }
    CallBuilder& peers(std::vector<std::byte*> bases, std::uint32_t my_rank) {
        bases_ = std::move(bases);
        table_ = PeerTable{bases_, my_rank};
        has_peers_ = true;
        return *this;
    }

    CallBuilder& launch_flags(std::uint32_t flags) {
        flags_ = flags;
        return *this;
    }

    KernelCall call() const { return KernelCall{name_, bound_, scalars_, has_peers_ ? &table_ : nullptr, flags_}; }

private:
    std::string name_;
    std::deque<Tensor> views_; // a deque keeps the addresses the BoundTensors hold
    std::vector<BoundTensor> bound_;
    std::vector<ScalarArg> scalars_;
    std::vector<std::byte*> bases_;
    PeerTable table_{};
    bool has_peers_ = false;
    std::uint32_t flags_ = 0;
};

inline void run(WorkerKind kind, const CallBuilder& b, bool faults = false) {
    run_builtin(kind, b.call(), faults);
}

inline void check(WorkerKind kind, const CallBuilder& b, bool faults = false) {
    check_builtin(kind, b.call(), faults);
}

// Calls f and requires a KernelError with `code` whose message contains `part`.
template <class F>
void require_kernel_error(F&& f, ErrorCode code, std::string_view part) {
    bool thrown = false;
    try {
        f();
    } catch (const KernelError& e) {
        thrown = true;
        INFO("message: " << e.what());
        CHECK(error_code_name(e.code()) == error_code_name(code));
        CHECK_THAT(std::string(e.what()), Catch::Contains(std::string(part)));
    }
    CHECK(thrown);
}

inline void require_check_error(WorkerKind kind, const CallBuilder& b, ErrorCode code, std::string_view part,
                                bool faults = false) {
    require_kernel_error([&] { check_builtin(kind, b.call(), faults); }, code, part);
}

inline void require_run_error(WorkerKind kind, const CallBuilder& b, ErrorCode code, std::string_view part,
                              bool faults = false) {
    require_kernel_error([&] { run_builtin(kind, b.call(), faults); }, code, part);
}

inline constexpr WorkerKind BOTH_KINDS[] = {WorkerKind::CHIP, WorkerKind::SUB};

} // namespace canopy::kernels::test
