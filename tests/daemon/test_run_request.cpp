// The fast path of run and submit requests (daemon/run_request.h): what it takes it reads exactly as the general
// path (parse_request, then parse_task) does, errors included, and everything else it leaves to that path.
#include "daemon/request_json.h"
#include "same_task.h"

#include <catch2/catch.hpp>
#include <optional>

using namespace canopy;
using daemon::ParsedTask;
using daemon::RequestError;
using nlohmann::json;

namespace {

const std::string BUF = "00112233445566778899aabbccddeeff.1.1";

// Every identity resolves to one 4096-byte buffer; anything else is UNKNOWN_BUFFER naming where.
BufferDescriptor resolve_any_id(const std::string& id, const std::string& where) {
    CanonicalIdentity identity{};
    try {
        identity = parse_identity(id);
    } catch (const WireError&) {
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, where + ": no buffer '" + id + "'");
    }
    return make_posix_shm_descriptor(identity, 4096, Access::READWRITE, "cnpytest");
}

struct Outcome {
    std::optional<ParsedTask> task;
    std::string error; // "CODE message"
};

template <typename F>
Outcome outcome(F&& decode) {
    Outcome o;
    try {
        o.task = decode();
    } catch (const RequestError& e) {
        o.error = std::string(error_code_name(e.code())) + " " + e.what();
    }
    return o;
}

// The body through both paths: the fast one must take it, and agree with the general one task by task.
void check_both_paths(const std::string& body) {
    INFO(body);
    const auto fast = daemon::parse_request(body);
    REQUIRE(fast.error.empty());
    REQUIRE(fast.run != nullptr);
    const json general = json::parse(body);
    for (const char* key : {"op", "id", "wait", "progress"}) {
        CHECK(fast.request.contains(key) == general.contains(key));
        if (general.contains(key)) {
            CHECK(fast.request[key] == general[key]);
        }
    }
    const auto given = [&](const char* key) { return general.contains(key) ? std::size_t{1} : std::size_t{0}; };
    CHECK(fast.request.size() == 1 + given("id") + given("wait") + given("progress"));
    std::vector<json> tasks =
        fast.run->single ? std::vector<json>{general["task"]} : general["graph"]["tasks"].get<std::vector<json>>();
    REQUIRE(tasks.size() == fast.run->tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        const Outcome expected = outcome([&] { return daemon::parse_task(tasks[i], resolve_any_id, "tasks[0]"); });
        const Outcome got =
            outcome([&] { return daemon::task_from_raw(fast.run->tasks[i], resolve_any_id, "tasks[0]"); });
        CHECK(got.error == expected.error);
        REQUIRE(got.task.has_value() == expected.task.has_value());
        if (got.task) {
            CHECK(testing::same_task(*got.task, *expected.task));
        }
    }
}

std::string tensor(const std::string& fields, const char* tag = "input") {
    return R"({"tensor":{"buffer":")" + BUF + "\"," + fields + R"(},"tag":")" + tag + "\"}";
}

std::string graph(const std::string& tasks) {
    return R"({"op":"run","graph":{"tasks":[)" + tasks + "]}}";
}

} // namespace

TEST_CASE("the fast path reads a run or submit request exactly as the general path does", "[run_request]") {
    check_both_paths(graph(R"({"name":"a","kernel":"fill","on":"sub0","args":[)" +
                           tensor(R"("dtype":"float32","shape":[4,4])", "output") +
                           R"(,{"scalar":{"float32":1.5}}]})"));
    // Strides, an offset, each tag, names given and omitted, tasks without args.
    check_both_paths(
        graph(R"({"kernel":"copy","on":"/chip0","args":[)" +
              tensor(R"("dtype":"int8","shape":[4,8],"strides":[16,2],"byte_offset":3)") + "," +
              tensor(R"("byte_offset":100,"shape":[32],"dtype":"int8")", "output") + "]}," +
              R"({"kernel":"sleep_ms","on":"sub1"},{"name":"x y \u00e9","on":"sub0","kernel":"scale","args":[)" +
              tensor(R"("dtype":"float64","shape":[2])", "inout") + R"(,{"scalar":{"float64":-2.5e-300}}]})"));
    // Scalars at their bounds: int64's ends, float32's largest finite (a double that rounds to FLT_MAX), -0 as
    // an integer literal, integers where a float is asked for.
    check_both_paths(graph(R"({"kernel":"sleep_ms","on":"sub0","args":[{"scalar":{"int64":-9223372036854775808}},)"
                           R"({"scalar":{"int64":9223372036854775807}},{"scalar":{"int64":-0}},)"
                           R"({"scalar":{"float32":3.4028235677973362e38}},{"scalar":{"float32":-0}},)"
                           R"({"scalar":{"float64":18446744073709551615}},{"scalar":{"float32":7}}]})"));
    // Every dtype; shapes and offsets at their bounds (the gate then refuses them, as parse_task's does).
    for (const char* dtype :
         {"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64"}) {
        check_both_paths(graph(R"({"kernel":"fill","on":"sub0","args":[)" +
                               tensor(std::string(R"("dtype":")") + dtype + R"(","shape":[3,1,2])", "output") + "]}"));
    }
    check_both_paths(
        graph(R"({"kernel":"fill","on":"sub0","args":[)" +
              tensor(R"("dtype":"uint8","shape":[4294967295],"byte_offset":18446744073709551615)", "output") + "]}"));
    // The head: every kind of id, wait and progress.
    const std::string task = R"({"kernel":"sleep_ms","on":"sub0","args":[{"scalar":{"int64":0}}]})";
    check_both_paths(R"({"op":"submit","task":)" + task + "}");
    check_both_paths(R"({"id":"r-1","wait":true,"progress":true,"op":"submit","task":)" + task + "}");
    check_both_paths(R"({"op":"submit","id":42,"wait":false,"task":)" + task + "}");
    check_both_paths(R"({"op":"submit","id":-42,"task":)" + task + "}");
    check_both_paths(R"({"op":"submit","id":18446744073709551615,"task":)" + task + "}");
    check_both_paths(R"({"op":"submit","id":null,"task":)" + task + "}");
    check_both_paths(R"({"op":"run","id":true,"graph":{"tasks":[)" + task + "]}}");
}

TEST_CASE("a task the fast path read fails the daemon's checks with parse_task's own error", "[run_request]") {
    // An unknown buffer, strides that do not match the shape, row-major strides past 32 bits, and views the gate
    // refuses: the checks task_from_raw makes, in parse_task's order.
    const std::string unknown = R"({"tensor":{"buffer":"nope","dtype":"float32","shape":[4],"strides":[1,1]},)"
                                R"("tag":"input"})";
    check_both_paths(graph(R"({"kernel":"copy","on":"sub0","args":[)" + unknown + "," +
                           tensor(R"("dtype":"float32","shape":[4])", "output") + "]}"));
    check_both_paths(graph(R"({"kernel":"fill","on":"sub0","args":[)" +
                           tensor(R"("dtype":"float32","shape":[4],"strides":[1,1])", "output") + "]}"));
    check_both_paths(graph(R"({"kernel":"fill","on":"sub0","args":[)" +
                           tensor(R"("dtype":"int8","shape":[65536,65536,2])", "output") + "]}"));
    check_both_paths(graph(R"({"kernel":"fill","on":"sub0","args":[)" +
                           tensor(R"("dtype":"float32","shape":[1025])", "output") + "]}"));
    check_both_paths(graph(R"({"kernel":"fill","on":"sub0","args":[)" +
                           tensor(R"("dtype":"float32","shape":[4],"byte_offset":4095)", "output") + "]}"));

    // The messages name the argument, as the general path's do.
    const auto parsed = daemon::parse_request(graph(R"({"kernel":"fill","on":"sub0","args":[{"scalar":{"int64":1}}]},)"
                                                    R"({"kernel":"copy","on":"sub0","args":[)" +
                                                    unknown + "]}"));
    REQUIRE(parsed.run != nullptr);
    try {
        (void)daemon::task_from_raw(parsed.run->tasks[1], resolve_any_id, "tasks[1]");
        FAIL("an unknown buffer was resolved");
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::UNKNOWN_BUFFER);
        CHECK(std::string(e.what()) == "tasks[1].args[0].tensor.buffer: no buffer 'nope'");
    }
    // A task that failed keeps its name, kernel and worker, for the rejection that names it.
    CHECK(parsed.run->tasks[1].kernel == "copy");
    CHECK(parsed.run->tasks[1].on == "sub0");
}

TEST_CASE("the fast path leaves every other body to the general path, which words the error", "[run_request]") {
    const std::string ok_tensor = tensor(R"("dtype":"float32","shape":[4])", "output");
    auto task_with = [](const std::string& members) { return graph("{" + members + "}"); };
    const std::vector<std::pair<const char*, std::string>> bodies = {
        {"not JSON", "{\"op\":\"run\","},
        {"not an object", "[1]"},
        {"another op", R"({"op":"status"})"},
        {"no op", R"({"graph":{"tasks":[{"kernel":"sleep_ms","on":"sub0"}]}})"},
        {"run with a task", R"({"op":"run","task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"submit with a graph", R"({"op":"submit","graph":{"tasks":[{"kernel":"sleep_ms","on":"sub0"}]}})"},
        {"both", R"({"op":"run","task":{"kernel":"sleep_ms","on":"sub0"},"graph":{"tasks":[]}})"},
        {"an unknown top-level key", R"({"op":"submit","x":1,"task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"an attachment", R"({"op":"submit","attachment":4,"task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"a duplicate op", R"({"op":"submit","op":"submit","task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"a float id", R"({"op":"submit","id":1.5,"task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"an object id", R"({"op":"submit","id":{},"task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"a wait that is not a boolean", R"({"op":"submit","wait":1,"task":{"kernel":"sleep_ms","on":"sub0"}})"},
        {"an empty graph", R"({"op":"run","graph":{"tasks":[]}})"},
        {"a graph with another key", R"({"op":"run","graph":{"tasks":[{"kernel":"sleep_ms","on":"sub0"}],"x":1}})"},
        {"a task that is not an object", graph("1")},
        {"a task without on", task_with(R"("kernel":"sleep_ms")")},
        {"a task without kernel", task_with(R"("on":"sub0")")},
        {"a duplicate kernel", task_with(R"("kernel":"sleep_ms","kernel":"fill","on":"sub0")")},
        {"a name that is not a string", task_with(R"("name":1,"kernel":"sleep_ms","on":"sub0")")},
        {"a launch", task_with(R"("kernel":"matmul","on":"chip0","launch":{"tf32":true})")},
        {"params", task_with(R"("kernel":"sleep_ms","on":"sub0","params":[])")},
        {"a module kernel", task_with(R"("kernel":"m:f","on":"chip0")")},
        {"args that are not an array", task_with(R"("kernel":"sleep_ms","on":"sub0","args":{})")},
        {"an argument neither tensor nor scalar", task_with(R"("kernel":"sleep_ms","on":"sub0","args":[{}])")},
        {"an argument with both", task_with(R"("kernel":"fill","on":"sub0","args":[{"tensor":{},"scalar":{}}])")},
        {"a tensor without a tag",
         task_with(R"("kernel":"fill","on":"sub0","args":[{"tensor":{"buffer":"b","dtype":"int8","shape":[1]}}])")},
        {"a scalar with a tag",
         task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"int64":1},"tag":"input"}])")},
        {"an argument with another key",
         task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"int64":1},"x":1}])")},
        {"a tensor after a scalar",
         task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"int64":1}},)" + ok_tensor + "]")},
        {"an unknown tag", task_with(R"("kernel":"fill","on":"sub0","args":[)" +
                                     tensor(R"("dtype":"float32","shape":[4])", "out") + "]")},
        {"an unknown dtype",
         task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensor(R"("dtype":"float8","shape":[4])") + "]")},
        {"a tensor without a shape",
         task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensor(R"("dtype":"float32")") + "]")},
        {"an empty shape",
         task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensor(R"("dtype":"float32","shape":[])") + "]")},
        {"a shape past MAX_DIMS", task_with(R"("kernel":"fill","on":"sub0","args":[)" +
                                            tensor(R"("dtype":"float32","shape":[1,1,1,1,1,1,1,1,1])") + "]")},
        {"a dimension past 32 bits", task_with(R"("kernel":"fill","on":"sub0","args":[)" +
                                               tensor(R"("dtype":"float32","shape":[4294967296])") + "]")},
        {"a float dimension",
         task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensor(R"("dtype":"float32","shape":[4.0])") + "]")},
        {"a negative offset", task_with(R"("kernel":"fill","on":"sub0","args":[)" +
                                        tensor(R"("dtype":"float32","shape":[4],"byte_offset":-1)") + "]")},
        {"a duplicate shape", task_with(R"("kernel":"fill","on":"sub0","args":[)" +
                                        tensor(R"("dtype":"float32","shape":[4],"shape":[2])") + "]")},
        {"an unknown tensor key",
         task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensor(R"("dtype":"float32","shape":[4],"x":0)") + "]")},
        {"an int64 past its range",
         task_with(R"("kernel":"sleep_ms","on":"sub0","args":[{"scalar":{"int64":9223372036854775808}}])")},
        {"a float int64", task_with(R"("kernel":"sleep_ms","on":"sub0","args":[{"scalar":{"int64":1.0}}])")},
        {"a float32 past its range",
         task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"float32":3.4028235677973366e38}}])")},
        {"a float of negative zero", task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"float64":-0.0}}])")},
        {"two scalar kinds", task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"int64":1,"float64":1}}])")},
        {"an unknown scalar kind", task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"int32":1}}])")},
        {"a number past 64 bits", task_with(R"("kernel":"fill","on":"sub0","args":[{"scalar":{"float64":1e400}}])")},
        {"text that is not UTF-8", task_with("\"kernel\":\"sleep_ms\",\"on\":\"sub\xff\"")},
    };
    for (const auto& [what, body] : bodies) {
        INFO(what << ": " << body);
        CHECK(daemon::scan_run_request(body) == nullptr);
        const auto parsed = daemon::parse_request(body);
        CHECK(parsed.run == nullptr);
    }
    // More arguments than a frame holds.
    std::string many;
    for (std::uint32_t i = 0; i <= MAX_SCALAR_ARGS; ++i) {
        many += std::string(i == 0 ? "" : ",") + R"({"scalar":{"int64":1}})";
    }
    CHECK(daemon::scan_run_request(task_with(R"("kernel":"sleep_ms","on":"sub0","args":[)" + many + "]")) == nullptr);
    std::string tensors;
    for (std::uint32_t i = 0; i <= MAX_TENSOR_ARGS; ++i) {
        tensors += (i == 0 ? "" : ",") + ok_tensor;
    }
    CHECK(daemon::scan_run_request(task_with(R"("kernel":"fill","on":"sub0","args":[)" + tensors + "]")) == nullptr);
    // One fewer of each is the plain form.
    many = many.substr(many.find(',') + 1);
    CHECK(daemon::scan_run_request(task_with(R"("kernel":"sleep_ms","on":"sub0","args":[)" + many + "]")) != nullptr);
}

TEST_CASE("a request the fast path leaves keeps the general path's refusal", "[run_request]") {
    const auto dup = daemon::parse_request(R"({"op":"submit","task":{"kernel":"a","kernel":"b","on":"sub0"}})");
    CHECK(dup.run == nullptr);
    CHECK(dup.error == "request: duplicate key \"kernel\" in object at /task");
}
