// Arbitrary bytes into decode_task_args: mutated valid encodings and random buffers, fixed seed. Every
// blob either throws WireError or decodes to tensors that lie inside their buffers by an independent
// 128-bit bound check, and re-encodes to exactly the input bytes.

#include "tests/protocol/support.h"
#include "tests/sanitizers.h"

#include <random>

using canopy::testing::property_cases;

using namespace canopy;

namespace {

using Blob = std::vector<std::byte>;

class BlobSource {
public:
    explicit BlobSource(std::uint64_t seed) : rng_(seed) {
        for (int i = 0; i < 48; ++i) {
            seeds_.push_back(encode_task_args(random_args()));
        }
    }

    // A blob for iteration `i`: one in eight fully random, the rest mutated seeds.
    Blob next(int i) {
        if (i % 8 == 0) {
            return random_blob();
        }
        Blob blob = seeds_[below(seeds_.size())];
        const std::uint64_t mutations = 1 + below(4);
        for (std::uint64_t m = 0; m < mutations; ++m) {
            mutate(blob);
        }
        if (below(2) == 0 && blob.size() >= TASK_ARGS_HEADER_BYTES) {
            test::put_u32(blob, 8, static_cast<std::uint32_t>(blob.size())); // get past the length check
        }
        return blob;
    }

private:
    std::uint64_t below(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_); }

    std::uint32_t interesting_u32() {
        constexpr std::array<std::uint32_t, 10> VALUES = {0, 1,           2,           3,           4,
                                                          7, 0x7fffffffU, 0x80000000U, 0x80000001U, UINT32_MAX};
        return below(3) == 0 ? static_cast<std::uint32_t>(rng_()) : VALUES[below(VALUES.size())];
    }

    std::uint64_t interesting_u64() {
        switch (below(5)) {
        case 0:
            return UINT64_MAX - below(16);
        case 1:
            return std::uint64_t{1} << below(64);
        case 2:
            return rng_();
        default:
            return below(8192);
        }
    }

    Tensor random_tensor() {
        const auto dtype = static_cast<DataType>(1 + below(9));
        const std::uint32_t elem = element_size(dtype);
        const std::uint64_t nbytes = below(4) == 0 ? UINT64_MAX - below(8) : 64 + below(1 << 16);
        BufferDescriptor d;
        switch (below(3)) {
        case 0:
            d = test::shm_descriptor(nbytes);
            break;
        case 1:
            d = make_vmm_descriptor(Backend::SIM_VMM, test::identity(2), nbytes, Access::READ,
                                    static_cast<std::uint32_t>(below(4)));
            break;
        default:
            d = make_fork_descriptor(Backend::FORK_COW, test::identity(3), nbytes, Access::READ, 0x10000);
        }
        for (;;) {
            Tensor t = test::raw_tensor(d, dtype, {}, {}, elem * below(8));
            t.ndims = static_cast<std::uint8_t>(1 + below(MAX_DIMS));
            for (std::uint32_t i = 0; i < t.ndims; ++i) {
                t.shapes[i] = static_cast<std::uint32_t>(1 + below(6));
                t.strides[i] = static_cast<std::uint32_t>(1 + below(12));
            }
            if (tensor_extent_bytes(t) <= nbytes - t.byte_offset) {
                return t;
            }
        }
    }

    TaskArgs random_args() {
        TaskArgs args;
        const std::uint64_t tensors = below(7);
        for (std::uint64_t i = 0; i < tensors; ++i) {
            args.tensors.push_back({random_tensor(), static_cast<TensorTag>(1 + below(3))});
        }
        const std::uint64_t scalars = below(5);
        for (std::uint64_t i = 0; i < scalars; ++i) {
            switch (below(3)) {
            case 0:
                args.scalars.push_back(ScalarArg::f32(static_cast<float>(below(1000)) * 0.5f));
                break;
            case 1:
                args.scalars.push_back(ScalarArg::f64(static_cast<double>(rng_())));
                break;
            default:
                args.scalars.push_back(ScalarArg::i64(static_cast<std::int64_t>(rng_())));
            }
        }
        return args;
    }

    Blob random_blob() {
        Blob blob(below(2) == 0 ? below(64) : below(MAX_TASK_ARGS_BYTES + 64));
        for (std::byte& b : blob) {
            b = static_cast<std::byte>(rng_());
        }
        if (below(2) == 0 && blob.size() >= TASK_ARGS_HEADER_BYTES) {
            test::put_u32(blob, 0, TASK_ARGS_MAGIC);
            test::put_u16(blob, 4, TASK_ARGS_VERSION);
            test::put_u16(blob, 6, 0);
            test::put_u32(blob, 8, static_cast<std::uint32_t>(blob.size()));
            test::put_u16(blob, 12, static_cast<std::uint16_t>(below(4)));
            test::put_u16(blob, 14, static_cast<std::uint16_t>(below(4)));
        }
        return blob;
    }

    // A field of a tensor record likely to matter for bounds: byte_offset, nbytes, ndims, shapes, strides.
    std::size_t view_field(const Blob& blob, std::size_t& width) {
        const std::size_t records = (blob.size() - TASK_ARGS_HEADER_BYTES) / TENSOR_RECORD_BYTES;
        const std::size_t record = TASK_ARGS_HEADER_BYTES + below(records) * TENSOR_RECORD_BYTES + 8;
        switch (below(4)) {
        case 0:
            width = 8;
            return record + (below(2) == 0 ? offsetof(Tensor, byte_offset)
                                           : offsetof(Tensor, buffer) + offsetof(BufferDescriptor, nbytes));
        case 1:
            width = 1;
            return record + offsetof(Tensor, ndims);
        case 2:
            width = 4;
            return record + offsetof(Tensor, shapes) + 4 * below(MAX_DIMS);
        default:
            width = 4;
            return record + offsetof(Tensor, strides) + 4 * below(MAX_DIMS);
        }
    }

    void write_le(Blob& blob, std::size_t at, std::size_t width, std::uint64_t value) {
        for (std::size_t i = 0; i < width && at + i < blob.size(); ++i) {
            blob[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
        }
    }

    void mutate(Blob& blob) {
        const std::uint64_t kind = below(8);
        if (blob.empty() || kind == 7) {
            blob.resize(blob.size() + 1 + below(200), static_cast<std::byte>(below(2) == 0 ? 0 : rng_()));
            return;
        }
        switch (kind) {
        case 0: // flip one bit
            blob[below(blob.size())] ^= static_cast<std::byte>(1U << below(8));
            break;
        case 1: // overwrite one byte
            blob[below(blob.size())] = static_cast<std::byte>(below(2) == 0 ? rng_() : interesting_u32());
            break;
        case 2: // truncate
            blob.resize(below(blob.size()));
            break;
        case 3:
        case 4:
        case 5: { // a bounds-relevant view field gets an interesting value
            if (blob.size() < TASK_ARGS_HEADER_BYTES + TENSOR_RECORD_BYTES) {
                blob[below(blob.size())] = static_cast<std::byte>(rng_());
                break;
            }
            std::size_t width = 0;
            const std::size_t at = view_field(blob, width);
            const std::uint64_t value = width == 8 ? interesting_u64() : (width == 1 ? below(10) : interesting_u32());
            write_le(blob, at, width, value);
            break;
        }
        default: { // overwrite a 4-byte word anywhere
            const std::size_t at = below(blob.size());
            write_le(blob, at, 4, interesting_u32());
        }
        }
    }

    std::mt19937_64 rng_;
    std::vector<Blob> seeds_;
};

} // namespace

TEST_CASE("decode of arbitrary bytes throws WireError or yields views inside their buffers", "[protocol]") {
    BlobSource source(0xdec0de5eedULL);
    TaskArgs reused;
    int decoded = 0;
    int decoded_with_tensors = 0;
    int refused = 0;
    const auto blobs = static_cast<int>(property_cases(120000));
    for (int i = 0; i < blobs; ++i) {
        const Blob blob = source.next(i);
        TaskArgs args;
        try {
            args = decode_task_args(blob);
        } catch (const WireError&) {
            ++refused;
            continue;
        }
        ++decoded;
        decoded_with_tensors += args.tensors.empty() ? 0 : 1;
        const std::string problem = test::check_decoded(args);
        if (!problem.empty()) {
            FAIL("blob " << i << ": " << problem);
        }
        if (encode_task_args(args) != blob) {
            FAIL("blob " << i << " does not re-encode to its own bytes");
        }
        if (i % 4 == 1) {
            decode_task_args_into(blob, reused);
            if (!(reused == args)) {
                FAIL("blob " << i << ": decode_task_args_into disagrees with decode_task_args");
            }
        }
    }
    CAPTURE(decoded, decoded_with_tensors, refused);
    // Both outcomes must be common, or the property says little.
    CHECK(decoded > blobs / 24);
    CHECK(decoded_with_tensors > blobs / 40);
    CHECK(refused > blobs * 5 / 12);
}
