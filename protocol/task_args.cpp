#include "protocol/task_args.h"

#include "protocol/detail/invalid_tensor.h"

#include <bit>
#include <cstring>
#include <string>

namespace canopy {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire ABI is little-endian");
static_assert(TENSOR_RECORD_BYTES == 184);
static_assert(MAX_TASK_ARGS_BYTES == 6160);

struct Header {
    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t reserved;
    std::uint32_t total_len;
    std::uint16_t tensor_count;
    std::uint16_t scalar_count;
};
static_assert(sizeof(Header) == TASK_ARGS_HEADER_BYTES);

struct ScalarRecord {
    std::uint8_t kind;
    std::uint8_t reserved[7];
    std::uint64_t bits;
};
static_assert(sizeof(ScalarRecord) == SCALAR_RECORD_BYTES);

std::string indexed(const char* name, std::size_t i) {
    return std::string(name) + "[" + std::to_string(i) + "]";
}

bool all_zero(const std::uint8_t* p, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

void check_counts(std::size_t tensors, std::size_t scalars) {
    if (tensors > MAX_TENSOR_ARGS) {
        detail::invalid_tensor("header.tensor_count", std::to_string(tensors) +
                                                          " tensor arguments exceed the limit of " +
                                                          std::to_string(MAX_TENSOR_ARGS));
    }
    if (scalars > MAX_SCALAR_ARGS) {
        detail::invalid_tensor("header.scalar_count", std::to_string(scalars) +
                                                          " scalar arguments exceed the limit of " +
                                                          std::to_string(MAX_SCALAR_ARGS));
    }
}

// Validates one tensor and prefixes any error's field with "args[i].".
void validate_arg(const Tensor& t, std::size_t i) {
    try {
        validate_tensor(t);
    } catch (const WireError& e) {
        detail::invalid_tensor(indexed("args", i) + "." + e.field(), e.problem());
    }
}

void check_scalar_bits(const ScalarArg& s, std::size_t i) {
    if (s.kind == ScalarKind::FLOAT32 && (s.bits >> 32) != 0) {
        detail::invalid_tensor(indexed("scalars", i) + ".value", "a float32 scalar keeps its high 4 bytes zero");
    }
}

Header read_header(std::span<const std::byte> blob) {
    if (blob.size() < TASK_ARGS_HEADER_BYTES) {
        detail::invalid_tensor("header", "blob of " + std::to_string(blob.size()) + " bytes is shorter than the " +
                                             std::to_string(TASK_ARGS_HEADER_BYTES) + "-byte header");
    }
    Header h;
    std::memcpy(&h, blob.data(), sizeof h);
    if (h.magic != TASK_ARGS_MAGIC) {
        detail::invalid_tensor("header.magic", "bad magic " + std::to_string(h.magic));
    }
    if (h.version != TASK_ARGS_VERSION) {
        detail::invalid_tensor("header.version", "unsupported version " + std::to_string(h.version));
    }
    if (h.reserved != 0) {
        detail::invalid_tensor("header.reserved", "reserved bytes must be zero");
    }
    if (h.total_len != blob.size()) {
        detail::invalid_tensor("header.total_len", "header says " + std::to_string(h.total_len) + " bytes, blob has " +
                                                       std::to_string(blob.size()));
    }
    check_counts(h.tensor_count, h.scalar_count);
    const std::size_t expected = TASK_ARGS_HEADER_BYTES + std::size_t{h.tensor_count} * TENSOR_RECORD_BYTES +
                                 std::size_t{h.scalar_count} * SCALAR_RECORD_BYTES;
    if (expected != blob.size()) {
        detail::invalid_tensor("header.total_len", std::to_string(h.tensor_count) + " tensors and " +
                                                       std::to_string(h.scalar_count) + " scalars take " +
                                                       std::to_string(expected) + " bytes, blob has " +
                                                       std::to_string(blob.size()));
    }
    return h;
}

} // namespace

const char* to_string(TensorTag t) noexcept {
    switch (t) {
    case TensorTag::INPUT:
        return "input";
    case TensorTag::OUTPUT:
        return "output";
    case TensorTag::INOUT:
        return "inout";
    }
    return "unknown";
}

const char* to_string(ScalarKind k) noexcept {
    switch (k) {
    case ScalarKind::FLOAT32:
        return "float32";
    case ScalarKind::FLOAT64:
        return "float64";
    case ScalarKind::INT64:
        return "int64";
    }
    return "unknown";
}

ScalarArg ScalarArg::f32(float v) noexcept {
    return {ScalarKind::FLOAT32, std::bit_cast<std::uint32_t>(v)};
}
ScalarArg ScalarArg::f64(double v) noexcept {
    return {ScalarKind::FLOAT64, std::bit_cast<std::uint64_t>(v)};
}
ScalarArg ScalarArg::i64(std::int64_t v) noexcept {
    return {ScalarKind::INT64, std::bit_cast<std::uint64_t>(v)};
}
float ScalarArg::as_f32() const noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
}
double ScalarArg::as_f64() const noexcept {
    return std::bit_cast<double>(bits);
}
std::int64_t ScalarArg::as_i64() const noexcept {
    return std::bit_cast<std::int64_t>(bits);
}
double ScalarArg::to_double() const noexcept {
    switch (kind) {
    case ScalarKind::FLOAT32:
        return as_f32();
    case ScalarKind::FLOAT64:
        return as_f64();
    case ScalarKind::INT64:
        return static_cast<double>(as_i64());
    }
    return 0.0;
}
std::int64_t ScalarArg::to_int64() const noexcept {
    const double limit = 9.2233720368547758e18; // 2^63
    switch (kind) {
    case ScalarKind::INT64:
        return as_i64();
    case ScalarKind::FLOAT32:
    case ScalarKind::FLOAT64: {
        const double v = to_double();
        // NaN and out-of-range values clamp instead of invoking undefined behaviour.
        if (!(v > -limit)) {
            return v != v ? 0 : INT64_MIN;
        }
        return v >= limit ? INT64_MAX : static_cast<std::int64_t>(v);
    }
    }
    return 0;
}

std::size_t task_args_size(const TaskArgs& args) noexcept {
    return TASK_ARGS_HEADER_BYTES + args.tensors.size() * TENSOR_RECORD_BYTES +
           args.scalars.size() * SCALAR_RECORD_BYTES;
}

std::size_t encode_task_args_into(const TaskArgs& args, std::span<std::byte> out) {
    check_counts(args.tensors.size(), args.scalars.size());
    for (std::size_t i = 0; i < args.tensors.size(); ++i) {
        if (!is_valid(args.tensors[i].tag)) {
            detail::invalid_tensor(indexed("args", i) + ".tag",
                                   "unknown tag " + std::to_string(static_cast<int>(args.tensors[i].tag)));
        }
        validate_arg(args.tensors[i].tensor, i);
    }
    for (std::size_t i = 0; i < args.scalars.size(); ++i) {
        if (!is_valid(args.scalars[i].kind)) {
            detail::invalid_tensor(indexed("scalars", i) + ".kind",
                                   "unknown scalar kind " + std::to_string(static_cast<int>(args.scalars[i].kind)));
        }
        check_scalar_bits(args.scalars[i], i);
    }
    const std::size_t size = task_args_size(args);
    if (out.size() < size) {
        detail::invalid_tensor("header.total_len", "blob of " + std::to_string(size) + " bytes does not fit in " +
                                                       std::to_string(out.size()) + " bytes");
    }
    const Header h{TASK_ARGS_MAGIC,
                   TASK_ARGS_VERSION,
                   0,
                   static_cast<std::uint32_t>(size),
                   static_cast<std::uint16_t>(args.tensors.size()),
                   static_cast<std::uint16_t>(args.scalars.size())};
    std::byte* p = out.data();
    std::memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (const TensorArg& arg : args.tensors) {
        std::memset(p, 0, 8);
        p[0] = static_cast<std::byte>(arg.tag);
        std::memcpy(p + 8, &arg.tensor, sizeof(Tensor));
        p += TENSOR_RECORD_BYTES;
    }
    for (const ScalarArg& s : args.scalars) {
        ScalarRecord r{};
        r.kind = static_cast<std::uint8_t>(s.kind);
        r.bits = s.bits;
        std::memcpy(p, &r, sizeof r);
        p += SCALAR_RECORD_BYTES;
    }
    return size;
}

std::vector<std::byte> encode_task_args(const TaskArgs& args) {
    std::vector<std::byte> blob(task_args_size(args));
    encode_task_args_into(args, blob);
    return blob;
}

void decode_task_args_into(std::span<const std::byte> blob, TaskArgs& out) {
    out.tensors.clear();
    out.scalars.clear();
    const Header h = read_header(blob);
    const std::byte* p = blob.data() + TASK_ARGS_HEADER_BYTES;
    out.tensors.reserve(h.tensor_count);
    for (std::size_t i = 0; i < h.tensor_count; ++i, p += TENSOR_RECORD_BYTES) {
        std::uint8_t head[8];
        std::memcpy(head, p, sizeof head);
        if (!is_valid(static_cast<TensorTag>(head[0]))) {
            detail::invalid_tensor(indexed("args", i) + ".tag", "unknown tag " + std::to_string(head[0]));
        }
        if (!all_zero(head + 1, 7)) {
            detail::invalid_tensor(indexed("args", i) + ".reserved", "reserved bytes must be zero");
        }
        TensorArg& arg = out.tensors.emplace_back();
        arg.tag = static_cast<TensorTag>(head[0]);
        std::memcpy(&arg.tensor, p + 8, sizeof(Tensor));
        validate_arg(arg.tensor, i);
    }
    out.scalars.reserve(h.scalar_count);
    for (std::size_t i = 0; i < h.scalar_count; ++i, p += SCALAR_RECORD_BYTES) {
        ScalarRecord r;
        std::memcpy(&r, p, sizeof r);
        if (!is_valid(static_cast<ScalarKind>(r.kind))) {
            detail::invalid_tensor(indexed("scalars", i) + ".kind", "unknown scalar kind " + std::to_string(r.kind));
        }
        if (!all_zero(r.reserved, sizeof r.reserved)) {
            detail::invalid_tensor(indexed("scalars", i) + ".reserved", "reserved bytes must be zero");
        }
        const ScalarArg s{static_cast<ScalarKind>(r.kind), r.bits};
        check_scalar_bits(s, i);
        out.scalars.push_back(s);
    }
}

TaskArgs decode_task_args(std::span<const std::byte> blob) {
    TaskArgs args;
    decode_task_args_into(blob, args);
    return args;
}

} // namespace canopy
