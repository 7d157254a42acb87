// The model-based soak of tests/service/soak.h.
#include "soak.h"

#include "protocol/base64.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <sys/mman.h>
#include <thread>

namespace canopy::e2e {
namespace {

using canopy::base64_decode;
using canopy::base64_encode;
using nlohmann::json;

constexpr std::size_t MAX_LIVE = 6;
constexpr std::uint64_t MAX_BYTES = 8192;

class SoakClient {
public:
    SoakClient(const Daemon& d, SoakTopology topology, std::uint64_t seed)
        : c_(d.socket()), topology_(std::move(topology)), rng_(seed), seed_(seed) {}

    void step() {
        const std::uint64_t pick = below(100);
        if (live_.size() < 2 || (pick < 6 && live_.size() < MAX_LIVE)) {
            create();
        } else if (pick < 14) {
            write();
        } else if (pick < 18) {
            write_attachment();
        } else if (pick < 28) {
            read();
        } else if (pick < 32) {
            read_attachment();
        } else if (pick < 36) {
            map_fd();
        } else if (pick < 52) {
            fill();
        } else if (pick < 64) {
            copy();
        } else if (pick < 72) {
            graph();
        } else if (pick < 78) {
            sleep();
        } else if (pick < 82) {
            cancel();
        } else if (pick < 84) {
            cancel_chain();
        } else if (pick < 85) {
            cancel_cover();
        } else if (pick < 90) {
            release();
        } else if (pick < 94) {
            use_released();
        } else {
            malformed();
        }
    }

    // Every accepted task has completed, and every live buffer reads back as its model.
    void finish() {
        for (std::size_t first = 0; first < tasks_.size(); first += 500) {
            const std::size_t n = std::min<std::size_t>(500, tasks_.size() - first);
            json ids = json::array();
            for (std::size_t i = first; i < first + n; ++i) {
                ids.push_back(tasks_[i]);
            }
            const json r = ask({{"op", "wait"}, {"task_ids", ids}, {"timeout_ms", 120000}});
            ensure(!r.at("timed_out").get<bool>(), "the tasks did not finish within 120 s");
            for (const auto& t : r.at("tasks")) {
                ensure(t.at("state") == "completed", "an accepted task did not complete: " + t.dump());
            }
        }
        for (const auto& [id, buffer] : live_) {
            check_read(id, 0, buffer.bytes.size());
        }
        for (const std::uint64_t id : sleeps_) {
            const json r = ask({{"op", "wait"}, {"task_id", id}, {"timeout_ms", 120000}});
            const std::string state = r.at("task").at("state");
            ensure(state == "completed" || (state == "failed" && r.at("task").at("error").at("code") == "CANCELLED"),
                   "a sleep neither completed nor was cancelled: " + r.dump());
        }
        for (const auto& [id, code] : failures_) {
            const json r = ask({{"op", "wait"}, {"task_id", id}, {"timeout_ms", 120000}});
            ensure(r.at("task").at("state") == "failed" && r.at("task").at("error").at("code") == code,
                   "a task that must fail " + code + " did not: " + r.dump());
        }
    }

    std::size_t requests() const noexcept { return requests_; }

private:
    std::uint64_t below(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_); }

    std::string history() const {
        std::ostringstream out;
        out << "seed " << seed_ << ", last requests:";
        for (const auto& line : history_) {
            out << "\n  " << line;
        }
        return out.str();
    }

    json ask(const json& request) {
        history_.push_back(request.dump().substr(0, 200));
        if (history_.size() > 12) {
            history_.erase(history_.begin());
        }
        ++requests_;
        json reply;
        try {
            reply = c_.request(request);
        } catch (const std::exception& e) {
            ensure(false, e.what());
        }
        history_.back() += " -> " + reply.dump().substr(0, 200);
        return reply;
    }

    // Throws, with the client's seed and last requests, unless `holds`. (Catch2's assertions are for the main
    // thread only; the clients run on threads of their own.)
    void ensure(bool holds, const std::string& what) const {
        if (!holds) {
            throw std::runtime_error(what + "\n" + history());
        }
    }

    // The reply is a refusal with one of `codes` and a message.
    void expect_refused(const json& reply, const std::vector<std::string>& codes) {
        ensure(reply.value("ok", true) == false, "expected a refusal");
        const std::string code = reply.at("error").at("code");
        ensure(std::find(codes.begin(), codes.end(), code) != codes.end(), "unexpected error code " + code);
        ensure(!reply.at("error").at("message").get<std::string>().empty(), "a refusal without a message");
    }

    void expect_ok(const json& reply) { ensure(reply.value("ok", false) == true, "expected success"); }

    struct Buffer {
        std::vector<std::uint8_t> bytes;
        std::string device; // "" for posix_shm, else the backend of the chip whose device memory holds it
        std::string host;   // "" for the daemon's own host, else the remote node whose host holds it
    };

    std::vector<std::uint8_t>& bytes_of(const std::string& id) { return live_.at(id).bytes; }

    const std::string& any_live() {
        auto it = live_.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(below(live_.size())));
        return it->first;
    }

    // A range [offset, offset + length) inside a buffer of `size` bytes, 1 byte at least.
    std::pair<std::uint64_t, std::uint64_t> range_in(std::uint64_t size, std::uint64_t longest = MAX_BYTES) {
        const std::uint64_t offset = below(size);
        const std::uint64_t length = 1 + below(std::min(size - offset, longest));
        return {offset, length};
    }

    std::string random_bytes(std::uint64_t n) {
        std::string out(n, '\0');
        for (auto& ch : out) {
            ch = static_cast<char>(below(256));
        }
        return out;
    }

    void create() {
        switch (below(10)) {
        case 0:
            return expect_refused(ask({{"op", "buffer.create"}, {"bytes", 0}}), {"BAD_REQUEST"});
        case 1:
            return expect_refused(ask({{"op", "buffer.create"}, {"bytes", std::uint64_t{1} << 49}}), {"BAD_REQUEST"});
        default:
            break;
        }
        const std::uint64_t bytes = 1 + below(MAX_BYTES);
        json request = {{"op", "buffer.create"}, {"bytes", bytes}};
        const std::string host = topology_.hosts[below(topology_.hosts.size())];
        std::string device;
        if (below(4) == 0 && has_chip(host)) {
            const SoakWorker& chip = *chips_of(host)[below(chips_of(host).size())];
            device = chip.chip;
            request["backend"] = "vmm";
            request["on"] = chip.path;
        } else if (!host.empty()) {
            request["on"] = host;
        }
        const json r = ask(request);
        expect_ok(r);
        live_[r.at("buffer").at("id")] = Buffer{std::vector<std::uint8_t>(bytes, 0), device, host};
    }

    void write() {
        const std::string id = any_live();
        auto& model = bytes_of(id);
        if (below(8) == 0) {
            const std::uint64_t offset = model.size() - below(std::min<std::uint64_t>(model.size(), 4));
            const json r = ask(
                {{"op", "buffer.write"}, {"buffer", id}, {"offset", offset}, {"data", base64_encode(random_bytes(5))}});
            return expect_refused(r, {"BAD_REQUEST"});
        }
        const auto [offset, length] = range_in(model.size(), 2048);
        const std::string data = random_bytes(length);
        expect_ok(ask({{"op", "buffer.write"}, {"buffer", id}, {"offset", offset}, {"data", base64_encode(data)}}));
        std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(offset));
    }

    void check_read(const std::string& id, std::uint64_t offset, std::uint64_t length) {
        const json r = ask({{"op", "buffer.read"}, {"buffer", id}, {"offset", offset}, {"bytes", length}});
        expect_ok(r);
        const std::string got = base64_decode(r.at("data").get<std::string>());
        ensure(got.size() == length,
               "a read of " + std::to_string(length) + " bytes got " + std::to_string(got.size()));
        check_bytes(id, offset, got);
    }

    // `got` equals the model of `id` from `offset` on.
    void check_bytes(const std::string& id, std::uint64_t offset, const std::string& got) const {
        const auto& model = live_.at(id).bytes;
        const std::uint64_t length = got.size();
        ensure(offset + length <= model.size(), "read " + std::to_string(length) + " bytes at " +
                                                    std::to_string(offset) + " of a buffer of " +
                                                    std::to_string(model.size()));
        for (std::uint64_t i = 0; i < length; ++i) {
            if (static_cast<std::uint8_t>(got[i]) != model[offset + i]) {
                ensure(false, "buffer " + id + " byte " + std::to_string(offset + i) + " is " +
                                  std::to_string(static_cast<std::uint8_t>(got[i])) + ", the model says " +
                                  std::to_string(model[offset + i]));
            }
        }
    }

    void read() {
        const std::string id = any_live();
        const auto size = bytes_of(id).size();
        if (below(8) == 0) {
            const json r = ask({{"op", "buffer.read"}, {"buffer", id}, {"offset", size}, {"bytes", 1 + below(4)}});
            return expect_refused(r, {"BAD_REQUEST"});
        }
        const auto [offset, length] = range_in(size);
        check_read(id, offset, length);
    }

    // A write whose bytes follow the request frame raw.
    void write_attachment() {
        const std::string id = any_live();
        auto& model = bytes_of(id);
        const auto [offset, length] = range_in(model.size());
        const std::string data = random_bytes(length);
        ask_with_bytes({{"op", "buffer.write"}, {"buffer", id}, {"offset", offset}, {"attachment", length}}, data);
        std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(offset));
    }

    void ask_with_bytes(const json& request, const std::string& data) {
        history_.push_back(request.dump().substr(0, 200));
        ++requests_;
        c_.send_frame(request.dump());
        c_.send_bytes(data);
        const auto reply = c_.read_reply(std::chrono::seconds(60));
        ensure(reply.has_value(), "no reply to a write with an attachment");
        history_.back() += " -> " + reply->dump().substr(0, 200);
        expect_ok(*reply);
    }

    // A read whose bytes follow the reply raw; now and then past the end, which cuts it short.
    void read_attachment() {
        const std::string id = any_live();
        const auto size = bytes_of(id).size();
        auto [offset, length] = range_in(size);
        if (below(4) == 0) {
            length = size - offset + 1 + below(64);
        }
        const json r =
            ask({{"op", "buffer.read"}, {"buffer", id}, {"offset", offset}, {"bytes", length}, {"attachment", true}});
        expect_ok(r);
        const std::uint64_t n = r.at("attachment");
        ensure(n == std::min(length, size - offset), "a read with an attachment of " + std::to_string(n) + " bytes");
        ensure(r.value("short", false) == (length > size - offset), "the read's \"short\" is wrong");
        const auto data = c_.read_bytes(n, std::chrono::seconds(60));
        ensure(data.has_value(), "the attachment did not arrive");
        check_bytes(id, offset, *data);
    }

    // The buffer's fd, mapped: it shows every earlier write, and bytes written through it are seen by the tasks
    // and reads after.
    void map_fd() {
        const std::string id = any_live();
        auto& model = bytes_of(id);
        const json r = ask({{"op", "buffer.fd"}, {"buffer", id}, {"access", "readwrite"}});
        if (!live_.at(id).host.empty()) {
            return expect_refused(r, {"BAD_REQUEST"}); // this host has no fd of another host's buffer
        }
        if (live_.at(id).device == "cuda") {
            expect_ok(r);
            c_.take_fds(); // a cuda_vmm handle is imported on a GPU, not mapped: tests/cuda covers that
            return;
        }
        expect_ok(r);
        auto fds = c_.take_fds();
        ensure(fds.size() == 1, "buffer.fd handed over " + std::to_string(fds.size()) + " fds");
        void* p = ::mmap(nullptr, model.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0].get(), 0);
        ensure(p != MAP_FAILED, "mmap of the buffer's fd failed");
        auto* bytes = static_cast<char*>(p);
        const std::string seen(bytes, model.size());
        const auto [offset, length] = range_in(model.size(), 256);
        const std::string data = random_bytes(length);
        std::memcpy(bytes + offset, data.data(), length);
        ::munmap(p, model.size());
        check_bytes(id, 0, seen);
        std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(offset));
    }

    // A task submitted without waiting (or, now and then, waited for).
    json submit(const json& task) {
        json request = {{"op", "submit"}, {"task", task}};
        if (below(5) == 0) {
            request["wait"] = true;
        }
        return ask(request);
    }

    void accepted(const json& r) {
        expect_ok(r);
        tasks_.push_back(r.at("task").at("id").get<std::uint64_t>());
    }

    // A worker of `host` ("" for the daemon's own): a chip of backend `device` when that is not empty.
    std::string worker_on(const std::string& host, const std::string& device) {
        std::vector<const SoakWorker*> fit;
        for (const auto& w : topology_.workers) {
            if (w.host == host && (device.empty() || w.chip == device)) {
                fit.push_back(&w);
            }
        }
        ensure(!fit.empty(), "the topology has no worker for host '" + host + "' and device '" + device + "'");
        return fit[below(fit.size())]->path;
    }

    std::vector<const SoakWorker*> chips_of(const std::string& host) const {
        std::vector<const SoakWorker*> chips;
        for (const auto& w : topology_.workers) {
            if (w.host == host && !w.chip.empty()) {
                chips.push_back(&w);
            }
        }
        return chips;
    }

    bool has_chip(const std::string& host) const { return !chips_of(host).empty(); }

    std::string worker() { return topology_.workers[below(topology_.workers.size())].path; }

    // A worker that cannot reach the buffer: a sub for device memory, or a worker of another host; "" if none.
    std::string unreachable_worker(const Buffer& b) {
        std::vector<const SoakWorker*> fit;
        for (const auto& w : topology_.workers) {
            if (w.host != b.host || (!b.device.empty() && w.chip != b.device)) {
                fit.push_back(&w);
            }
        }
        return fit.empty() ? "" : fit[below(fit.size())]->path;
    }

    void fill() {
        const std::string name = "fill" + std::to_string(requests_);
        if (below(8) == 0) {
            return expect_refused(submit(past_end_fill(name)), {"INVALID_TENSOR"});
        }
        const std::string id = any_live();
        if (const std::string wrong = unreachable_worker(live_.at(id)); !wrong.empty() && below(6) == 0) {
            const json r =
                submit(task(name, "fill", wrong, {tensor_arg(id, "output", {1}, {}, 0, "uint8"), int64_arg(1)}));
            return expect_refused(r, {"UNREACHABLE_BUFFER"});
        }
        // The model changes first: a refusal ends the soak either way.
        accepted(submit(plan_fill(live_, name)));
    }

    // A fill of 8 bytes that ends past its buffer's end, which the daemon refuses INVALID_TENSOR.
    json past_end_fill(const std::string& name) {
        const std::string id = any_live();
        const Buffer& b = live_.at(id);
        const std::uint64_t offset = b.bytes.size() - below(std::min<std::uint64_t>(b.bytes.size(), 4));
        return task(name, "fill", worker_on(b.host, b.device),
                    {tensor_arg(id, "output", {8}, {}, offset, "uint8"), int64_arg(1)});
    }

    // A fill of a random range of a live buffer, every element or every second or third one, applied to
    // `models` (the live buffers' models, or a graph's copy of them as its earlier tasks leave them).
    json plan_fill(std::map<std::string, Buffer>& models, const std::string& name) {
        const std::string id = any_live();
        const Buffer& b = models.at(id);
        const std::uint64_t value = below(128);
        const std::uint64_t stride = 1 + below(3);
        const auto [offset, span] = range_in(b.bytes.size());
        const std::uint64_t count = 1 + (span - 1) / stride;
        for (std::uint64_t i = 0; i < count; ++i) {
            models.at(id).bytes[offset + i * stride] = static_cast<std::uint8_t>(value);
        }
        return task(name, "fill", worker_on(b.host, b.device),
                    {tensor_arg(id, "output", {count}, {stride}, offset, "uint8"),
                     int64_arg(static_cast<std::int64_t>(value))});
    }

    // `length` bytes from `src` of one live buffer to `dst` of another (or the same one).
    struct CopyPlan {
        std::string from;
        std::string to;
        std::uint64_t length = 0;
        std::uint64_t src = 0;
        std::uint64_t dst = 0;
        bool reachable = true;    // some chip or sub reaches both buffers
        bool overlapping = false; // within one buffer, the two ranges share a byte
    };

    CopyPlan pick_copy() {
        CopyPlan p{any_live(), any_live()};
        const Buffer& a = live_.at(p.from);
        const Buffer& b = live_.at(p.to);
        p.length = 1 + below(std::min(a.bytes.size(), b.bytes.size()));
        p.src = below(a.bytes.size() - p.length + 1);
        p.dst = below(b.bytes.size() - p.length + 1);
        // No chip reaches the device memory of both backends.
        p.reachable = !(a.host == b.host && !a.device.empty() && !b.device.empty() && a.device != b.device);
        p.overlapping = p.from == p.to && p.src < p.dst + p.length && p.dst < p.src + p.length;
        return p;
    }

    // The copy's task, on the output's host: within a host a copy that touches device memory runs on a chip; one
    // across hosts on any worker of the output's host (the bytes move over the link, staged where they are device
    // memory).
    json copy_task(const CopyPlan& p, const std::string& name) {
        const Buffer& a = live_.at(p.from);
        const Buffer& b = live_.at(p.to);
        const std::string on = worker_on(b.host, a.host != b.host ? "" : a.device.empty() ? b.device : a.device);
        return task(name, "copy", on,
                    {tensor_arg(p.from, "input", {p.length}, {}, p.src, "uint8"),
                     tensor_arg(p.to, "output", {p.length}, {}, p.dst, "uint8")});
    }

    static void apply_copy(std::map<std::string, Buffer>& models, const CopyPlan& p) {
        const auto& in = models.at(p.from).bytes;
        const std::vector<std::uint8_t> bytes(in.begin() + static_cast<std::ptrdiff_t>(p.src),
                                              in.begin() + static_cast<std::ptrdiff_t>(p.src + p.length));
        std::copy(bytes.begin(), bytes.end(), models.at(p.to).bytes.begin() + static_cast<std::ptrdiff_t>(p.dst));
    }

    void copy() {
        const CopyPlan p = pick_copy();
        const std::string name = "copy" + std::to_string(requests_);
        if (!p.reachable) {
            const json r = submit(task(
                name, "copy", worker_on(live_.at(p.from).host, live_.at(p.from).device),
                {tensor_arg(p.from, "input", {1}, {}, 0, "uint8"), tensor_arg(p.to, "output", {1}, {}, 0, "uint8")}));
            return expect_refused(r, {"UNREACHABLE_BUFFER"});
        }
        const json r = submit(copy_task(p, name));
        if (p.overlapping) {
            return expect_refused(r, {"OVERLAPPING_WRITES"});
        }
        accepted(r);
        apply_copy(live_, p);
    }

    // A `run` of 2 to 6 fills and copies whose dependencies the daemon infers in graph order, as the model applies
    // them; now and then waited for. One graph in five carries a bad task (a view past its buffer's end, or a name
    // used twice): then every task is rejected, naming the bad one, and nothing runs.
    void graph() {
        std::map<std::string, Buffer> staged = live_;
        const std::size_t n = 2 + below(5);
        json tasks = json::array();
        for (std::size_t i = 0; i < n; ++i) {
            const std::string name = "g" + std::to_string(requests_) + "." + std::to_string(i);
            const CopyPlan p = below(2) == 0 ? pick_copy() : CopyPlan{};
            if (p.from.empty() || !p.reachable || p.overlapping) {
                tasks.push_back(plan_fill(staged, name));
            } else {
                apply_copy(staged, p);
                tasks.push_back(copy_task(p, name));
            }
        }
        const bool bad = below(5) == 0;
        const std::size_t at = 1 + below(n - 1);
        std::string code;
        if (bad && below(2) == 0) {
            tasks[at]["name"] = tasks[0]["name"];
            code = "BAD_REQUEST";
        } else if (bad) {
            tasks[at] = past_end_fill(tasks[at]["name"].get<std::string>());
            code = "INVALID_TENSOR";
        }
        const bool wait = !bad && below(4) == 0;
        const json r = ask({{"op", "run"}, {"graph", {{"tasks", tasks}}}, {"wait", wait}});
        expect_ok(r);
        const json& states = r.at("tasks");
        ensure(states.size() == n,
               "a graph of " + std::to_string(n) + " tasks got " + std::to_string(states.size()) + " states");
        for (std::size_t i = 0; i < n; ++i) {
            const json& t = states[i];
            if (!bad) {
                ensure(!wait || t.at("state") == "completed", "a waited graph's task did not complete: " + t.dump());
                tasks_.push_back(t.at("id").get<std::uint64_t>());
                continue;
            }
            ensure(t.at("state") == "rejected", "a task of a graph with a bad task was not rejected: " + t.dump());
            const std::string expected = i == at ? code : "BAD_REQUEST";
            ensure(t.at("error").at("code") == expected,
                   "a rejected graph's task " + std::to_string(i) + " is not " + expected + ": " + t.dump());
        }
        if (!bad) {
            live_ = std::move(staged);
        }
    }

    // A graph of a sleep that holds a view as input and a fill of that view, which therefore waits for it; the
    // sleep is then cancelled at once. Cancelled while queued: the sleep fails CANCELLED and the fill
    // DEPENDENCY_FAILED, at once, so the model keeps the bytes; already running: both complete.
    void cancel_chain() {
        const std::string id = any_live();
        const Buffer& b = live_.at(id);
        const auto [offset, length] = range_in(b.bytes.size());
        const std::uint64_t value = below(128);
        const std::string name = "chain" + std::to_string(requests_);
        const json tasks = json::array(
            {sleep_task(name + ".sleep", worker_on(b.host, b.device), static_cast<std::int64_t>(5 + below(30)),
                        {tensor_arg(id, "input", {length}, {}, offset, "uint8")}),
             task(name + ".fill", "fill", worker_on(b.host, b.device),
                  {tensor_arg(id, "output", {length}, {}, offset, "uint8"),
                   int64_arg(static_cast<std::int64_t>(value))})});
        const json r = ask({{"op", "run"}, {"graph", {{"tasks", tasks}}}});
        expect_ok(r);
        const std::uint64_t sleep = r.at("tasks").at(0).at("id");
        const std::uint64_t fill = r.at("tasks").at(1).at("id");
        const json c = ask({{"op", "cancel"}, {"task_ids", json::array({sleep})}});
        expect_ok(c);
        const std::string what = c.at("tasks").at(0).at("cancel");
        if (what == "cancelled") {
            failures_.emplace_back(sleep, "CANCELLED");
            failures_.emplace_back(fill, "DEPENDENCY_FAILED");
            return;
        }
        ensure(what == "running" || what == "finished", "cancel answered " + what);
        tasks_.push_back(sleep);
        tasks_.push_back(fill);
        auto& model = bytes_of(id);
        std::fill(model.begin() + static_cast<std::ptrdiff_t>(offset),
                  model.begin() + static_cast<std::ptrdiff_t>(offset + length), static_cast<std::uint8_t>(value));
    }

    // A graph of a task that holds a whole buffer and a sleep over it, which covers the first one's access (later
    // tasks and steps wait for the sleep alone); the sleep is then cancelled at once. The first task must still
    // complete, and the requests after it that touch the buffer must still wait for it. Two of three times a sleep
    // over nothing goes first on the same worker, so that the first task has not started when a step queued
    // behind the cancelled sleep is unblocked:
    //   - the buffer's release: one that did not wait would free the buffer before the worker mapped it;
    //   - a write of the buffer's first bytes, behind a first task that fills the buffer: one that did not wait
    //     would be overwritten by the fill, which the model (fill, then write) catches at the next read.
    // The step is sent, then the cancel, on one connection (replies come in request order).
    void cancel_cover() {
        const std::string id = any_live();
        const Buffer& b = live_.at(id);
        const std::uint64_t size = b.bytes.size();
        const json view = tensor_arg(id, "inout", {size}, {}, 0, "uint8");
        const std::string name = "cover" + std::to_string(requests_);
        const std::string on = worker_on(b.host, b.device);
        const std::uint64_t mode = live_.size() >= 2 ? below(3) : 1 + below(2);
        const bool release_after = mode == 0;
        const bool write_after = mode == 1;
        const std::uint64_t value = below(128);
        json tasks = json::array();
        if (release_after || write_after) {
            tasks.push_back(sleep_task(name + ".first", on, static_cast<std::int64_t>(10 + below(20))));
        }
        tasks.push_back(write_after ? task(name + ".hold", "fill", on,
                                           {tensor_arg(id, "output", {size}, {}, 0, "uint8"),
                                            int64_arg(static_cast<std::int64_t>(value))})
                                    : sleep_task(name + ".hold", on, static_cast<std::int64_t>(1 + below(10)), {view}));
        tasks.push_back(sleep_task(name + ".doomed", on, 0, {view}));
        const json r = ask({{"op", "run"}, {"graph", {{"tasks", tasks}}}});
        expect_ok(r);
        const json& states = r.at("tasks");
        for (std::size_t i = 0; i + 1 < states.size(); ++i) {
            tasks_.push_back(states.at(i).at("id"));
        }
        const std::uint64_t doomed = states.back().at("id");
        const json cancel = {{"op", "cancel"}, {"task_ids", json::array({doomed})}};
        json c;
        if (release_after || write_after) {
            const std::string data = random_bytes(std::min<std::uint64_t>(size, 16));
            const json step = release_after
                                  ? json{{"op", "buffer.release"}, {"buffer", id}}
                                  : json{{"op", "buffer.write"}, {"buffer", id}, {"data", base64_encode(data)}};
            history_.push_back(step.dump().substr(0, 200) + " then " + cancel.dump());
            requests_ += 2;
            c_.send_frame(step.dump());
            c_.send_frame(cancel.dump());
            const auto stepped = c_.read_reply(std::chrono::seconds(30));
            ensure(stepped.has_value() && stepped->value("ok", false),
                   "a step behind a cancelled task failed: " + (stepped ? stepped->dump() : std::string("no reply")));
            const auto cancelled = c_.read_reply(std::chrono::seconds(30));
            ensure(cancelled.has_value(), "no reply to the cancel");
            c = *cancelled;
            if (release_after) {
                released_.push_back(id);
                live_.erase(id);
            } else {
                auto& model = bytes_of(id);
                std::fill(model.begin(), model.end(), static_cast<std::uint8_t>(value));
                std::copy(data.begin(), data.end(), model.begin());
            }
        } else {
            c = ask(cancel);
        }
        expect_ok(c);
        const std::string what = c.at("tasks").at(0).at("cancel");
        if (what == "cancelled") {
            failures_.emplace_back(doomed, "CANCELLED");
        } else {
            ensure(what == "running" || what == "finished", "cancel answered " + what);
            tasks_.push_back(doomed);
        }
    }

    // A sleep that holds a view as input (later writers wait for it) and is never cancelled, or one that holds
    // nothing, which cancel() may take back.
    void sleep() {
        const std::string name = "sleep" + std::to_string(requests_);
        const std::int64_t ms = static_cast<std::int64_t>(below(15));
        if (below(2) == 0) {
            const std::string id = any_live();
            const auto [offset, length] = range_in(bytes_of(id).size());
            accepted(ask({{"op", "submit"},
                          {"task", sleep_task(name, worker_on(live_.at(id).host, live_.at(id).device), ms,
                                              {tensor_arg(id, "input", {length}, {}, offset, "uint8")})}}));
            return;
        }
        const json r = ask({{"op", "submit"}, {"task", sleep_task(name, worker(), ms)}});
        expect_ok(r);
        sleeps_.push_back(r.at("task").at("id").get<std::uint64_t>());
    }

    void cancel() {
        if (sleeps_.empty()) {
            return expect_refused(ask({{"op", "cancel"}, {"task_ids", json::array({std::uint64_t{1} << 40})}}),
                                  {"BAD_REQUEST"});
        }
        const std::uint64_t id = sleeps_[below(sleeps_.size())];
        const json r = ask({{"op", "cancel"}, {"task_ids", json::array({id})}});
        expect_ok(r);
        const std::string what = r.at("tasks").at(0).at("cancel");
        ensure(what == "cancelled" || what == "running" || what == "finished", "cancel answered " + what);
    }

    // Released without waiting for the tasks queued over it, which must still complete (finish() checks them).
    void release() {
        if (live_.size() < 2) {
            return;
        }
        const std::string id = any_live();
        expect_ok(ask({{"op", "buffer.release"}, {"buffer", id}}));
        released_.push_back(id);
        live_.erase(id);
    }

    void use_released() {
        if (released_.empty()) {
            return;
        }
        const std::string id = released_[below(released_.size())];
        json r;
        switch (below(5)) {
        case 0:
            r = ask({{"op", "buffer.read"}, {"buffer", id}, {"bytes", 1}});
            break;
        case 1:
            r = ask({{"op", "buffer.write"}, {"buffer", id}, {"data", base64_encode("x")}});
            break;
        case 2:
            r = ask({{"op", "buffer.release"}, {"buffer", id}});
            break;
        case 3:
            r = ask({{"op", "buffer.show"}, {"buffer", id}});
            break;
        default:
            r = ask({{"op", "submit"},
                     {"task", task("stale" + std::to_string(requests_), "fill", worker(),
                                   {tensor_arg(id, "output", {1}, {}, 0, "uint8"), int64_arg(1)})}});
            break;
        }
        expect_refused(r, {"STALE_BUFFER"});
    }

    // Requests with a member of the wrong type or value: each refused BAD_REQUEST, nothing changed.
    void malformed() {
        const std::string id = any_live();
        const std::vector<json> bad = {
            {{"op", "buffer.read"}, {"buffer", id}, {"offset", "zero"}},
            {{"op", "buffer.write"}, {"buffer", id}, {"data", "not base64!"}},
            {{"op", "buffer.create"}, {"bytes", -5}},
            {{"op", "buffer.release"}, {"buffer", 42}},
            {{"op", "buffer.frobnicate"}},
            {{"op", "submit"}, {"task", {{"name", "x"}, {"kernel", "fill"}, {"on", "sub0"}, {"args", "none"}}}},
            {{"op", "wait"}, {"task_ids", json::array()}},
        };
        expect_refused(ask(bad[below(bad.size())]), {"BAD_REQUEST", "INVALID_TENSOR"});
    }

    RawClient c_;
    SoakTopology topology_;
    std::mt19937_64 rng_;
    std::uint64_t seed_;
    std::map<std::string, Buffer> live_;
    std::vector<std::string> released_;
    std::vector<std::uint64_t> tasks_;                            // must complete
    std::vector<std::uint64_t> sleeps_;                           // complete, or fail CANCELLED
    std::vector<std::pair<std::uint64_t, std::string>> failures_; // must fail with that code
    std::vector<std::string> history_;
    std::size_t requests_ = 0;
};

} // namespace

void soak(const Daemon& d, const SoakTopology& topology, std::size_t steps) {
    constexpr std::size_t CLIENTS = 4;
    const std::size_t log_before = d.log().size();
    // CANOPY_SOAK_SEED sets the first client's seed (the others follow it) for runs beyond the fixed one.
    const char* given = std::getenv("CANOPY_SOAK_SEED");
    const std::uint64_t seed = given != nullptr ? std::stoull(given) : 1000;
    std::vector<std::unique_ptr<SoakClient>> clients;
    for (std::size_t i = 0; i < CLIENTS; ++i) {
        clients.push_back(std::make_unique<SoakClient>(d, topology, seed + i));
    }
    // Each client thread records its first failure; the main thread reports them.
    std::vector<std::string> failures(CLIENTS);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < CLIENTS; ++i) {
        threads.emplace_back([&, i] {
            try {
                for (std::size_t s = 0; s < steps; ++s) {
                    clients[i]->step();
                }
            } catch (const std::exception& e) {
                failures[i] = e.what();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    const bool any_failed =
        std::any_of(failures.begin(), failures.end(), [](const std::string& f) { return !f.empty(); });
    if (any_failed) {
        const std::string log = d.log();
        UNSCOPED_INFO("the daemon's log ends: " << log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
    }
    for (std::size_t i = 0; i < CLIENTS; ++i) {
        INFO("client " << i);
        CHECK(failures[i] == "");
        std::string finished;
        try {
            clients[i]->finish();
        } catch (const std::exception& e) {
            finished = e.what();
        }
        CHECK(finished == "");
        CHECK(clients[i]->requests() > steps / 2);
    }
    const json status = d.cli_json({"status"});
    for (const auto& w : status.at("workers")) {
        CHECK(w.at("state") == "running");
        CHECK(w.at("restarts") == 0);
    }
    // Refusals are logged at debug at most: the soak leaves no warning or error in the log.
    const std::string log = d.log().substr(log_before);
    CHECK_THAT(log, !Catch::Contains(" warning ") && !Catch::Contains(" error "));
}

} // namespace canopy::e2e
