// The module table without a GPU or a child process: a ModuleService whose Host records the frames it is given
// and answers them as the test says, so every path of a load (all answered, one failed, a replacement, a load
// racing another, no target) and of an unload is checked with the buffers it stages and releases.
#include "daemon/module_service.h"
#include "fixture.h"
#include "protocol/module_launch.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <future>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::ModuleFrame;
using daemon::ModuleLoadResult;
using daemon::ModuleService;
using daemon::RequestError;
using namespace std::chrono_literals;

namespace {

const std::string PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

std::vector<std::byte> bytes(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}

// Two cuda chips; every frame sent is recorded with its callback for the test to answer.
struct Tree {
    TempDir state;
    daemon::BufferRegistry buffers{state.path / "journal"};
    daemon::ChildSlot chip0, chip1;
    struct Sent {
        daemon::ChildSlot* child;
        ModuleFrame frame;
        daemon::TaskCallback done;
    };
    std::vector<Sent> sent;
    std::vector<CanonicalIdentity> released;
    bool live = true;
    ModuleService modules{buffers, "/", host()};

    Tree() {
        chip0.path = "/chip0";
        chip0.spec = {"chip0", ChildKind::CUDA_CHIP, 0, {}, {}};
        chip1.path = "/chip1";
        chip1.spec = {"chip1", ChildKind::CUDA_CHIP, 1, {}, {}};
    }
    ModuleService::Host host() {
        ModuleService::Host h;
        h.targets = [this] {
            return live ? std::vector<daemon::ChildSlot*>{&chip0, &chip1} : std::vector<daemon::ChildSlot*>{};
        };
        h.send = [this](daemon::ChildSlot& child, ModuleFrame frame, daemon::TaskCallback done) {
            sent.push_back({&child, std::move(frame), std::move(done)});
        };
        h.release_everywhere = [this](const CanonicalIdentity& id) { released.push_back(id); };
        return h;
    }
    // Answers the `i`th frame sent.
    void answer(std::size_t i, ErrorCode code = ErrorCode::OK, std::string message = {}) {
        sent.at(i).done({0, code, std::move(message), 0, 0});
    }
    std::future<ModuleLoadResult> load(const std::string& name, const std::string& image = PTX) {
        auto promise = std::make_shared<std::promise<ModuleLoadResult>>();
        auto future = promise->get_future();
        modules.load_async(name, bytes(image), [promise](ModuleLoadResult r) { promise->set_value(std::move(r)); });
        return future;
    }
    bool is_buffer(const CanonicalIdentity& id) const {
        for (const auto& b : buffers.list()) {
            if (b.descriptor.identity == id) {
                return true;
            }
        }
        return false;
    }
};

BufferDescriptor image_of(const ModuleFrame& frame) {
    const TaskArgs args = decode_task_args(frame.blob);
    REQUIRE(args.tensors.size() == 1);
    return args.tensors[0].tensor.buffer;
}

} // namespace

TEST_CASE("a module load stages its image read-only, reaches every target and completes when all answered",
          "[daemon][module]") {
    Tree t;
    auto done = t.load("kern");
    REQUIRE(t.sent.size() == 2);
    CHECK(t.sent[0].child == &t.chip0);
    CHECK(t.sent[1].child == &t.chip1);
    CHECK(t.sent[0].frame.kernel == std::string(MODULE_LOAD_FRAME) + "kern");
    const BufferDescriptor image = image_of(t.sent[0].frame);
    CHECK(image.access == Access::READ);
    CHECK(image.nbytes == PTX.size());
    auto mapped = map_shm(image);
    CHECK(std::memcmp(mapped.data(), PTX.data(), PTX.size()) == 0);
    CHECK(t.modules.module_of_buffer(image.identity) == "kern");
    // Not usable until every target answered.
    t.answer(1);
    CHECK(done.wait_for(0ms) == std::future_status::timeout);
    CHECK(t.modules.list().empty());
    CHECK_THROWS_AS(t.modules.require_usable("kern"), RequestError);
    t.answer(0);
    const ModuleLoadResult r = done.get();
    REQUIRE(r.code == ErrorCode::OK);
    CHECK(r.module.chips == std::vector<std::string>{"/chip0", "/chip1"});
    CHECK(r.module.bytes == PTX.size());
    REQUIRE(t.modules.list().size() == 1);
    t.modules.require_usable("kern");
    // A child that comes up again gets the same frame.
    const auto replays = t.modules.replay_frames();
    REQUIRE(replays.size() == 1);
    CHECK(replays[0].kernel == t.sent[0].frame.kernel);
    CHECK(replays[0].blob == t.sent[0].frame.blob);
}

TEST_CASE("remote nodes answer with the chips that loaded a module, and a load no chip took is NO_CONSUMER",
          "[daemon][module]") {
    Tree t;
    daemon::ChildSlot hb, hc;
    hb.path = "/hb";
    hb.spec = {"hb", ChildKind::REMOTE, 0, {}, {}};
    hc.path = "/hc";
    hc.spec = {"hc", ChildKind::REMOTE, 0, {}, {}};
    CHECK(ModuleService::takes_modules(hb.spec));
    std::vector<daemon::ChildSlot*> targets = {&hb, &hc};
    ModuleService::Host host = t.host();
    host.targets = [&] { return targets; };
    ModuleService modules(t.buffers, "/", host);
    const auto load = [&](const std::string& name) {
        auto promise = std::make_shared<std::promise<ModuleLoadResult>>();
        auto future = promise->get_future();
        modules.load_async(name, bytes(PTX), [promise](ModuleLoadResult r) { promise->set_value(std::move(r)); });
        return future;
    };

    auto loaded = load("kern");
    REQUIRE(t.sent.size() == 2);
    t.answer(0, ErrorCode::OK, "/hb/chip0 /hb/chip1");
    t.answer(1, ErrorCode::OK, ""); // hc has no cuda chip
    const ModuleLoadResult r = loaded.get();
    REQUIRE(r.code == ErrorCode::OK);
    CHECK(r.module.chips == std::vector<std::string>{"/hb/chip0", "/hb/chip1"});

    auto none = load("other");
    REQUIRE(t.sent.size() == 4);
    const BufferDescriptor image = image_of(t.sent[2].frame);
    t.answer(2, ErrorCode::OK, "");
    t.answer(3, ErrorCode::OK, "");
    const ModuleLoadResult empty = none.get();
    CHECK(empty.code == ErrorCode::NO_CONSUMER);
    CHECK(empty.message == "module other: no live cuda chip under / can load a module");
    REQUIRE(t.sent.size() == 6); // unloaded everywhere, its image released, nothing recorded
    CHECK(t.sent[4].frame.kernel == std::string(MODULE_UNLOAD_FRAME) + "other");
    CHECK(t.sent[5].frame.kernel == std::string(MODULE_UNLOAD_FRAME) + "other");
    CHECK_FALSE(t.is_buffer(image.identity));
    REQUIRE(modules.list().size() == 1);
    CHECK(modules.list()[0].name == "kern");
}

TEST_CASE("a load one target refuses fails KERNEL_FAILED naming it, is unloaded everywhere and leaves no buffer",
          "[daemon][module]") {
    Tree t;
    auto done = t.load("kern");
    const BufferDescriptor image = image_of(t.sent[0].frame);
    t.answer(0);
    t.answer(1, ErrorCode::KERNEL_FAILED, "ptxas: syntax error at line 3");
    const ModuleLoadResult r = done.get();
    CHECK(r.code == ErrorCode::KERNEL_FAILED);
    CHECK(r.message == "module kern did not load: /chip1: ptxas: syntax error at line 3");
    REQUIRE(t.sent.size() == 4);
    CHECK(t.sent[2].frame.kernel == std::string(MODULE_UNLOAD_FRAME) + "kern");
    CHECK(t.sent[3].frame.kernel == std::string(MODULE_UNLOAD_FRAME) + "kern");
    CHECK_FALSE(t.is_buffer(image.identity));
    CHECK(t.released == std::vector<CanonicalIdentity>{image.identity});
    CHECK(t.modules.list().empty());
    CHECK(t.modules.replay_frames().empty());
}

TEST_CASE("loading a module again replaces it and releases the old image once the new load finished",
          "[daemon][module]") {
    Tree t;
    auto first = t.load("kern");
    t.answer(0);
    t.answer(1);
    REQUIRE(first.get().code == ErrorCode::OK);
    const BufferDescriptor old_image = image_of(t.sent[0].frame);
    auto second = t.load("kern", PTX + "// v2\n");
    const BufferDescriptor new_image = image_of(t.sent[2].frame);
    // Still usable, and both images belong to it, while the new load is in flight.
    t.modules.require_usable("kern");
    CHECK(t.modules.module_of_buffer(old_image.identity) == "kern");
    CHECK(t.modules.module_of_buffer(new_image.identity) == "kern");
    // A third load of the same name while this one runs is refused.
    try {
        (void)t.load("kern");
        FAIL("a load of a module still loading was accepted");
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        CHECK(std::string(e.what()) == "module kern is being loaded already; try again when that load finished");
    }
    t.answer(2);
    t.answer(3);
    REQUIRE(second.get().code == ErrorCode::OK);
    CHECK_FALSE(t.is_buffer(old_image.identity));
    CHECK(t.is_buffer(new_image.identity));
    CHECK(t.released == std::vector<CanonicalIdentity>{old_image.identity});
    REQUIRE(t.modules.list().size() == 1);
    CHECK(t.modules.list()[0].bytes == PTX.size() + 6);
}

TEST_CASE("unloading a module sends the unload to every target and releases its image", "[daemon][module]") {
    Tree t;
    CHECK_FALSE(t.modules.unload("kern"));
    auto done = t.load("kern");
    t.answer(0);
    t.answer(1);
    REQUIRE(done.get().code == ErrorCode::OK);
    const BufferDescriptor image = image_of(t.sent[0].frame);
    CHECK(t.modules.unload("kern"));
    REQUIRE(t.sent.size() == 4);
    CHECK(t.sent[2].frame.kernel == std::string(MODULE_UNLOAD_FRAME) + "kern");
    CHECK(t.sent[3].child == &t.chip1);
    CHECK_FALSE(t.is_buffer(image.identity));
    CHECK(t.released == std::vector<CanonicalIdentity>{image.identity});
    CHECK_FALSE(t.modules.unload("kern"));
    try {
        t.modules.require_usable("kern");
        FAIL("an unloaded module was usable");
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::UNKNOWN_KERNEL);
        CHECK(std::string(e.what()) == "no module kern is loaded (canopy module load kern FILE)");
    }
}

TEST_CASE("a module load with no live target is NO_CONSUMER and stages nothing", "[daemon][module]") {
    Tree t;
    t.live = false;
    try {
        (void)t.load("kern");
        FAIL("a load without targets was accepted");
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::NO_CONSUMER);
        CHECK(std::string(e.what()) == "module kern: no live cuda chip under / can load a module");
    }
    CHECK(t.buffers.list().empty());
    CHECK(t.sent.empty());
}
