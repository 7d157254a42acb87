// canopy_fuzz_seeds DIR: writes the seed corpus of the fuzz targets, DIR/fuzz_decode_task_args/*.bin
// (valid TaskArgs blobs), DIR/fuzz_parse_identity/*.txt (valid identity strings) and DIR/fuzz_remote_call/*.bin
// (TaskCalls messages carrying those blobs, one call each and all in one, as an L4 sends them to its node),
// DIR/fuzz_remote_buffer/*.bin (descriptors a node answers, the Buffer calls of an L4 and a node's Hello). The
// output is committed under tests/fuzz/corpus/; rerun this after a change to the wire layout.

#include "protocol/mailbox.h"
#include "protocol/protocol.h"
#include "remote/canopy_remote.pb.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace canopy;

CanonicalIdentity seed_identity(std::uint8_t salt, std::uint64_t buffer_id, std::uint32_t generation) {
    CanonicalIdentity id{};
    for (std::size_t i = 0; i < id.owner_instance.size(); ++i) {
        id.owner_instance[i] = static_cast<std::uint8_t>(salt * 31 + i * 7 + 1);
    }
    id.buffer_id = buffer_id;
    id.generation = generation;
    return id;
}

void write_file(const std::filesystem::path& path, const void* data, std::size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) {
        throw std::runtime_error("cannot write " + path.string());
    }
}

std::vector<TaskArgs> seed_args() {
    const BufferDescriptor shm = make_posix_shm_descriptor(seed_identity(1, 1, 1), 1 << 20, Access::READWRITE, "seed");
    const BufferDescriptor vmm =
        make_vmm_descriptor(Backend::CUDA_VMM, seed_identity(2, 9, 3), 1 << 21, Access::READ, 1);
    const BufferDescriptor cow =
        make_fork_descriptor(Backend::FORK_COW, seed_identity(3, 4, 1), 4096, Access::READ, 0x7f0000000000ULL);
    const BufferDescriptor huge =
        make_fork_descriptor(Backend::FORK_SHM, seed_identity(4, 5, 2), UINT64_MAX, Access::READWRITE, 0x10000);
    std::vector<TaskArgs> all(6);
    // 0: no arguments at all.
    // 1: one contiguous input.
    all[1].tensors = {{make_tensor(shm, DataType::FLOAT32, {256}), TensorTag::INPUT}};
    // 2: overlapping views of one buffer, every tag, every scalar kind.
    all[2].tensors = {{make_tensor(shm, DataType::FLOAT32, {8, 8}, {16, 1}, 0), TensorTag::INPUT},
                      {make_tensor(shm, DataType::FLOAT32, {8, 8}, {1, 16}, 0), TensorTag::OUTPUT},
                      {make_tensor(shm, DataType::FLOAT32, {4, 4}, {16, 1}, 4 * 18), TensorTag::INOUT}};
    all[2].scalars = {ScalarArg::f32(1.5f), ScalarArg::f64(-2.0), ScalarArg::i64(42)};
    // 3: device and fork-cow buffers, several dtypes.
    all[3].tensors = {{make_tensor(vmm, DataType::BFLOAT16, {2, 3, 4}, {}, 2), TensorTag::INPUT},
                      {make_tensor(cow, DataType::INT8, {64}, {3}, 7), TensorTag::INPUT},
                      {make_tensor(vmm, DataType::INT64, {16}, {2}, 64), TensorTag::OUTPUT}};
    // 4: views at the 64-bit edge of the largest buffer.
    all[4].tensors = {
        {make_tensor(huge, DataType::UINT8, {UINT32_MAX, 3, UINT32_MAX - 1}, {UINT32_MAX, UINT32_MAX, 1}, 1),
         TensorTag::INOUT},
        {make_tensor(huge, DataType::FLOAT64, {4}, {}, UINT64_MAX - 7 - 32), TensorTag::INPUT}};
    // 5: every count at its limit.
    for (std::uint32_t i = 0; i < MAX_TENSOR_ARGS; ++i) {
        all[5].tensors.push_back({make_tensor(shm, DataType::INT32, {i + 1, 2}, {}, 8 * i), TensorTag::INPUT});
    }
    for (std::uint32_t i = 0; i < MAX_SCALAR_ARGS; ++i) {
        all[5].scalars.push_back(ScalarArg::i64(i));
    }
    return all;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: canopy_fuzz_seeds DIR\n");
        return 2;
    }
    const std::filesystem::path root = argv[1];
    const auto blobs = root / "fuzz_decode_task_args";
    const auto identities = root / "fuzz_parse_identity";
    std::filesystem::create_directories(blobs);
    std::filesystem::create_directories(identities);

    const std::vector<TaskArgs> args = seed_args();
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::vector<std::byte> blob = encode_task_args(args[i]);
        write_file(blobs / ("seed" + std::to_string(i) + ".bin"), blob.data(), blob.size());
    }
    const auto calls = root / "fuzz_remote_call";
    std::filesystem::create_directories(calls);
    canopy::remote::v1::TaskCalls several;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::vector<std::byte> blob = encode_task_args(args[i]);
        canopy::remote::v1::TaskCall call;
        call.set_session(1);
        call.set_kernel(i % 2 == 0 ? "scale" : "sleep_ms");
        call.set_worker(i % 2 == 0 ? "chip0" : "sub0");
        call.set_args(reinterpret_cast<const char*>(blob.data()), blob.size());
        const LaunchConfig launch{{1, 1, 1}, {128, 1, 1}, 0, 0};
        call.set_launch(reinterpret_cast<const char*>(&launch), sizeof launch);
        call.set_timeout_ms(static_cast<std::uint32_t>(i * 100));
        call.set_task_id(i + 1);
        canopy::remote::v1::TaskCalls one;
        *one.add_calls() = call;
        const std::string bytes = one.SerializeAsString();
        write_file(calls / ("seed" + std::to_string(i) + ".bin"), bytes.data(), bytes.size());
        *several.add_calls() = std::move(call);
    }
    const std::string all = several.SerializeAsString(); // every call above in one message
    write_file(calls / "several.bin", all.data(), all.size());
    const std::vector<CanonicalIdentity> ids = {seed_identity(1, 0, 1), seed_identity(2, 42, 7),
                                                seed_identity(3, UINT64_MAX, UINT32_MAX)};
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::string text = to_string(ids[i]);
        write_file(identities / ("seed" + std::to_string(i) + ".txt"), text.data(), text.size());
    }
    // Remote buffers: descriptors a node answers, and the Buffer calls its L4 makes.
    const auto buffers = root / "fuzz_remote_buffer";
    std::filesystem::create_directories(buffers);
    std::size_t n = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const BufferDescriptor d = make_posix_shm_descriptor(ids[i], 4096u << i, Access::READWRITE, "cnpyfuzz");
        write_file(buffers / ("seed" + std::to_string(n++) + ".bin"), &d, sizeof d);
        canopy::remote::v1::BufferCall release;
        release.set_session(i + 1);
        release.set_release(std::string(reinterpret_cast<const char*>(&ids[i]), sizeof ids[i]));
        const std::string bytes = release.SerializeAsString();
        write_file(buffers / ("seed" + std::to_string(n++) + ".bin"), bytes.data(), bytes.size());
    }
    canopy::remote::v1::BufferCall create;
    create.set_session(1);
    create.set_create_bytes(1 << 20);
    create.set_access(3);
    const std::string bytes = create.SerializeAsString();
    write_file(buffers / ("seed" + std::to_string(n++) + ".bin"), bytes.data(), bytes.size());
    // The Hello a node opens its session with.
    canopy::remote::v1::Hello hello;
    hello.set_name("hb");
    hello.set_owner_instance(std::string(reinterpret_cast<const char*>(ids[1].owner_instance.data()), 16));
    hello.set_session(1);
    hello.set_protocol(2);
    hello.set_pid(4242);
    const std::string hello_bytes = hello.SerializeAsString();
    write_file(buffers / "hello0.bin", hello_bytes.data(), hello_bytes.size());
    return 0;
}
