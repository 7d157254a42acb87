// Property test: random small graphs over small buffers with random views and tags, driven through random
// interleavings of add, pop_ready, complete and fail, against two brute-force oracles:
//   - bytes: tasks i < j conflict when their views of one buffer share a byte (byte sets enumerated) and
//     one of the two writes. Safety: a task runs only after every conflicting task that was unfinished
//     when it was added has completed, and it never runs when one of those failed.
//   - overlap: the same relation with tensor_overlap != NONE in place of a shared byte, the scheduler's
//     own rule. No spurious waiting: a WAITING task has an unfinished overlap-dependency, and a task
//     failed as a dependent is reachable from the failed task through overlap-dependencies.
// Pruning covered accesses must not lose an ordering under any completion or failure order. In a second set of
// runs a quarter of the tasks are tolerant (a failed dependency is finished for them): there every task runs only
// after every conflicting task unfinished when it was added has finished, however it ended, and no tolerant task
// is failed as a dependent.

#include "tests/sanitizers.h"
#include "tests/scheduler/support.h"

#include <algorithm>
#include <random>

using canopy::testing::property_cases;

using namespace canopy;
using namespace canopy::scheduler;
using namespace canopy::test;

namespace {

constexpr std::uint64_t BUFFER_BYTES = 64;

enum class Fate { UNFINISHED, COMPLETED, FAILED };

struct ModelTask {
    std::vector<TensorArg> args;
    std::vector<std::uint64_t> masks;      // byte set of each argument
    std::vector<std::size_t> byte_deps;    // earlier tasks unfinished at add that share a byte where one writes
    std::vector<std::size_t> overlap_deps; // the same by tensor_overlap
    Fate fate = Fate::UNFINISHED;
    bool running = false;
    bool tolerant = false;
};

struct Random {
    std::mt19937_64 rng;
    std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); }
    bool chance(std::uint32_t percent) { return below(100) < percent; }
};

// A random valid view of `buffer`: whole buffer, 1-D strided, or 2-D with a random pitch.
Tensor random_view(Random& r, const BufferDescriptor& buffer) {
    static constexpr DataType DTYPES[] = {DataType::INT8, DataType::INT16, DataType::FLOAT32};
    for (;;) {
        const DataType dtype = DTYPES[r.below(3)];
        const std::uint32_t elem = element_size(dtype);
        const std::uint32_t elems = static_cast<std::uint32_t>(BUFFER_BYTES) / elem;
        const std::uint64_t offset = std::uint64_t{r.below(elems)} * elem;
        try {
            switch (r.below(4)) {
            case 0:
                return make_tensor(buffer, dtype, {elems});
            case 1:
                return make_tensor(buffer, dtype, {1 + r.below(8)}, {1 + r.below(4)}, offset);
            default:
                return make_tensor(buffer, dtype, {1 + r.below(4), 1 + r.below(4)}, {1 + r.below(10), 1 + r.below(2)},
                                   offset);
            }
        } catch (const WireError&) {
            // Past the end of the buffer: draw again.
        }
    }
}

bool conflicts(const ModelTask& a, const ModelTask& b, bool by_bytes) {
    for (std::size_t x = 0; x < a.args.size(); ++x) {
        for (std::size_t y = 0; y < b.args.size(); ++y) {
            if (!tag_writes(a.args[x].tag) && !tag_writes(b.args[y].tag)) {
                continue;
            }
            const bool meet = by_bytes ? (a.masks[x] & b.masks[y]) != 0 &&
                                             a.args[x].tensor.buffer.identity == b.args[y].tensor.buffer.identity
                                       : tensor_overlap(a.args[x].tensor, b.args[y].tensor) != Overlap::NONE;
            if (meet) {
                return true;
            }
        }
    }
    return false;
}

class Run {
public:
    // `tolerant_percent`: the share of tasks added tolerant.
    Run(std::uint64_t seed, std::size_t tasks, std::uint32_t tolerant_percent = 0)
        : r_{std::mt19937_64(seed)}, total_(tasks), tolerant_percent_(tolerant_percent) {
        for (std::uint64_t b = 0; b < 3; ++b) {
            buffers_.push_back(sched_buffer(BUFFER_BYTES, 10 + b));
        }
    }

    void step() {
        const std::uint32_t op = r_.below(100);
        if (op < 40 && model_.size() < total_) {
            add_one();
        } else if (op < 60) {
            pop_one();
        } else if (op < 90) {
            finish_one(false);
        } else {
            finish_one(true);
        }
        check_waiting();
    }

    bool all_added() const { return model_.size() == total_; }

    // Runs every remaining task to completion; all must finish.
    void drain() {
        for (std::size_t guard = 0; s_.unfinished() > 0; ++guard) {
            REQUIRE(guard < 10 * total_);
            pop_one();
            finish_one(false);
        }
        for (const ModelTask& t : model_) {
            CHECK(t.fate != Fate::UNFINISHED);
        }
    }

private:
    void add_one() {
        ModelTask t;
        const std::uint32_t nargs = 1 + r_.below(3);
        for (std::uint32_t a = 0; a < nargs; ++a) {
            const BufferDescriptor& buffer = buffers_[r_.below(static_cast<std::uint32_t>(buffers_.size()))];
            Tensor view = random_view(r_, buffer);
            if (!model_.empty() && r_.chance(25)) { // reuse an earlier view: chains and exact covers
                const ModelTask& earlier = model_[r_.below(static_cast<std::uint32_t>(model_.size()))];
                view = earlier.args[0].tensor;
            }
            t.args.push_back({view, static_cast<TensorTag>(1 + r_.below(3))});
            t.masks.push_back(byte_mask(view));
        }
        for (std::size_t i = 0; i < model_.size(); ++i) {
            if (model_[i].fate != Fate::UNFINISHED) {
                continue;
            }
            if (conflicts(model_[i], t, true)) {
                t.byte_deps.push_back(i);
            }
            if (conflicts(model_[i], t, false)) {
                t.overlap_deps.push_back(i);
            }
        }
        t.tolerant = r_.chance(tolerant_percent_);
        const std::size_t id = model_.size();
        model_.push_back(t);
        const bool ready = s_.add(id, "t" + std::to_string(id), model_.back().args, NO_LANE, t.tolerant);
        if (ready) {
            CHECK(model_.back().byte_deps.empty());
        } else {
            CHECK_FALSE(model_.back().overlap_deps.empty());
        }
    }

    void pop_one() {
        const std::optional<TaskId> id = s_.pop_ready();
        if (!id) {
            return;
        }
        ModelTask& t = model_.at(*id);
        REQUIRE(t.fate == Fate::UNFINISHED);
        REQUIRE_FALSE(t.running);
        for (const std::size_t dep : t.byte_deps) {
            INFO("task " << *id << " runs before task " << dep << " has " << (mixed() ? "finished" : "completed"));
            CHECK((mixed() || model_[dep].fate == Fate::COMPLETED));
            CHECK(model_[dep].fate != Fate::UNFINISHED);
        }
        t.running = true;
    }

    // Completes (or fails) a random running task; fails a random unfinished one when `fail`.
    void finish_one(bool fail) {
        std::vector<std::size_t> pick;
        for (std::size_t i = 0; i < model_.size(); ++i) {
            if (model_[i].fate == Fate::UNFINISHED && (model_[i].running || fail)) {
                pick.push_back(i);
            }
        }
        if (pick.empty()) {
            return;
        }
        const std::size_t id = pick[r_.below(static_cast<std::uint32_t>(pick.size()))];
        if (!fail) {
            std::vector<TaskId> now_ready;
            s_.complete(id, now_ready);
            model_[id].fate = Fate::COMPLETED;
            return;
        }
        std::vector<FailedTask> failed;
        s_.fail(id, ErrorCode::KERNEL_FAILED, failed);
        model_[id].fate = Fate::FAILED;
        const std::string message =
            "dependency 't" + std::to_string(id) + "' (task " + std::to_string(id) + ") failed: KERNEL_FAILED";
        for (const FailedTask& f : failed) {
            CHECK(f.second == message);
            CHECK(reachable(id, f.first));
            REQUIRE(model_.at(f.first).fate == Fate::UNFINISHED);
            CHECK_FALSE(model_[f.first].running);
            CHECK_FALSE(model_[f.first].tolerant);
            model_[f.first].fate = Fate::FAILED;
        }
        // Where tolerant tasks stop failures, a task may outlive a failed task its view shares bytes with: one
        // that a tolerant write wholly rewrote between them.
        for (std::size_t k = 0; k < model_.size() && !mixed(); ++k) {
            if (model_[k].fate != Fate::UNFINISHED) {
                continue;
            }
            for (const std::size_t dep : model_[k].byte_deps) {
                INFO("task " << k << " outlives the failure of task " << dep << " it conflicts with");
                CHECK(model_[dep].fate != Fate::FAILED);
            }
        }
    }

    // Whether `to` depends on `from` through overlap-dependencies.
    bool reachable(std::size_t from, std::size_t to) const {
        std::vector<bool> seen(model_.size(), false);
        std::vector<std::size_t> stack{to};
        while (!stack.empty()) {
            const std::size_t k = stack.back();
            stack.pop_back();
            if (k == from) {
                return true;
            }
            for (const std::size_t dep : model_[k].overlap_deps) {
                if (dep >= from && !seen[dep]) {
                    seen[dep] = true;
                    stack.push_back(dep);
                }
            }
        }
        return false;
    }

    void check_waiting() {
        for (std::size_t k = 0; k < model_.size(); ++k) {
            const ModelTask& t = model_[k];
            const std::optional<TaskState> state = s_.state(k);
            REQUIRE(state.has_value() == (t.fate == Fate::UNFINISHED));
            if (state == TaskState::WAITING) {
                CHECK(std::any_of(t.overlap_deps.begin(), t.overlap_deps.end(),
                                  [&](std::size_t dep) { return model_[dep].fate == Fate::UNFINISHED; }));
            }
            if (state == TaskState::READY || state == TaskState::RUNNING) {
                for (const std::size_t dep : t.byte_deps) {
                    CHECK(model_[dep].fate != Fate::UNFINISHED);
                    CHECK((mixed() || model_[dep].fate == Fate::COMPLETED));
                }
            }
        }
    }

    bool mixed() const noexcept { return tolerant_percent_ > 0; }

    Random r_;
    std::size_t total_;
    std::uint32_t tolerant_percent_;
    std::vector<BufferDescriptor> buffers_;
    std::vector<ModelTask> model_;
    Scheduler s_;
};

} // namespace

TEST_CASE("pruning never loses an ordering under random completion and failure orders", "[scheduler]") {
    for (std::uint64_t seed = 1; seed <= property_cases(400); ++seed) {
        INFO("seed " << seed);
        Run run(seed, 40);
        for (std::size_t guard = 0; !run.all_added(); ++guard) {
            REQUIRE(guard < 100000);
            run.step();
        }
        run.drain();
    }
}

TEST_CASE("with tolerant tasks among them, no task runs before a conflicting earlier task has finished",
          "[scheduler]") {
    for (std::uint64_t seed = 1; seed <= property_cases(400); ++seed) {
        INFO("seed " << seed);
        Run run(seed, 40, 25);
        for (std::size_t guard = 0; !run.all_added(); ++guard) {
            REQUIRE(guard < 100000);
            run.step();
        }
        run.drain();
    }
}
