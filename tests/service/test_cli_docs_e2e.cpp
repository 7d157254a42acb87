// docs/cli.md's examples, run as the page says: its console blocks, in order, as one shell session against
// canopyd with config/examples/cpu.json. Each command's output (stdout, then stderr) must have the shape of
// the output shown under it: the same lines with the same words, where identities, numbers, sizes and
// durations may differ. A command whose shown output has an error line (`canopy: CODE: ...`) must exit
// non-zero, any other must exit 0.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace canopy::e2e;
namespace fs = std::filesystem;

namespace {

// One `$ ` line of a console block (with the lines a trailing `\` continues it on) and the lines shown after it.
struct Example {
    int line = 0; // in docs/cli.md, 1-based
    std::string command;
    std::vector<std::string> shown;
};

std::vector<std::string> cli_md_lines() {
    std::istringstream in(read_file(std::string(CANOPY_SOURCE_DIR) + "/docs/cli.md"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

std::vector<Example> cli_examples(const std::vector<std::string>& lines) {
    std::vector<Example> examples;
    bool inside = false;    // in a console block
    bool commanded = false; // and past its first command
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string& line = lines[i];
        if (!inside) {
            inside = line == "```console";
            commanded = false;
        } else if (line == "```") {
            inside = false;
        } else if (line.rfind("$ ", 0) == 0) {
            examples.push_back({static_cast<int>(i + 1), line.substr(2), {}});
            while (examples.back().command.ends_with("\\") && i + 1 < lines.size()) {
                examples.back().command += "\n" + lines[++i];
            }
            commanded = true;
        } else if (!commanded) {
            FAIL("docs/cli.md:" << i + 1 << ": output before the first command of a console block");
        } else {
            examples.back().shown.push_back(line);
        }
    }
    return examples;
}

// What a line of output must keep: its words, with every identity (`0011..ff.3.1` in the page, 32 hex digits
// from the daemon) as <id>, every number, size and duration (`4096`, `1.5`, `12us`, `3m04s`) as <n>, and each
// run of spaces as one.
std::string shape(const std::string& line) {
    static const std::regex identity(R"([0-9a-f]+\.{2,3}[0-9a-f]+\.\d+\.\d+|[0-9a-f]{32}\.\d+\.\d+)");
    static const std::regex number(R"(\b\d+(\.\d+)?([a-z]+\d*[a-z]*)?\b)");
    static const std::regex spaces(R"(\s+)");
    std::string s = std::regex_replace(line, identity, "<id>");
    s = std::regex_replace(s, number, "<n>");
    s = std::regex_replace(s, spaces, " ");
    const auto first = s.find_first_not_of(' ');
    return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(' ') - first + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

bool shows_error(const Example& e) {
    for (const auto& line : e.shown) {
        if (line.rfind("canopy: ", 0) == 0 && line.rfind("canopy: warning: ", 0) != 0) {
            return true;
        }
    }
    return false;
}

// Runs every example in one bash in `dir` (docs/ and config/ of the sources reachable there, `canopy` on PATH,
// CANOPY_SOCKET set), each command's stdout, stderr and exit status saved as dir/.out/N.{out,err,rc}.
void run_session(const std::vector<Example>& examples, const fs::path& dir, const std::string& socket) {
    fs::create_symlink(fs::path(CANOPY_SOURCE_DIR) / "docs", dir / "docs");
    fs::create_symlink(fs::path(CANOPY_SOURCE_DIR) / "config", dir / "config");
    fs::create_directory(dir / ".out");
    std::string script = "cd " + dir.string() + "\nexport CANOPY_SOCKET=" + socket +
                         " PATH=" + fs::path(CANOPY_PATH).parent_path().string() + ":$PATH\n";
    for (std::size_t i = 0; i < examples.size(); ++i) {
        const std::string out = (dir / ".out" / std::to_string(i)).string();
        script += "{ " + examples[i].command + "\n} >" + out + ".out 2>" + out + ".err; echo $? >" + out + ".rc\n";
    }
    const Output o = run_program("/bin/bash", {"-c", script});
    INFO(o.out << o.err);
    REQUIRE(o.rc == 0);
}

} // namespace

TEST_CASE("every command the cli docs show is in a console block with its output", "[service][docs]") {
    const auto lines = cli_md_lines();
    bool fenced = false;
    std::string fence;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].rfind("```", 0) == 0) {
            fenced = !fenced;
            fence = lines[i];
        } else if (fenced && fence != "```console") {
            INFO("docs/cli.md:" << i + 1 << ": " << lines[i]);
            CHECK(lines[i].rfind("$ ", 0) != 0); // a recorded command belongs in a console block, where it runs
        }
    }
    const auto examples = cli_examples(lines);
    CHECK(examples.size() >= 20);
}

TEST_CASE("the cli docs' examples print what the page shows, as one session against canopyd", "[service][docs]") {
    const auto examples = cli_examples(cli_md_lines());
    REQUIRE_FALSE(examples.empty());
    const auto config = nlohmann::json::parse(read_file(std::string(CANOPY_SOURCE_DIR) + "/config/examples/cpu.json"));
    Daemon d(config);
    TempDir dir;
    run_session(examples, dir.path, d.socket());

    for (std::size_t i = 0; i < examples.size(); ++i) {
        const Example& e = examples[i];
        const std::string base = (dir.path / ".out" / std::to_string(i)).string();
        std::string printed = read_file(base + ".out") + read_file(base + ".err");
        for (auto at = printed.find(d.socket()); at != std::string::npos; at = printed.find(d.socket(), at)) {
            printed.replace(at, d.socket().size(), "/run/canopy/canopy.sock"); // the page shows the default socket
        }
        const int rc = std::stoi(read_file(base + ".rc"));
        std::vector<std::string> want;
        for (const auto& line : e.shown) {
            want.push_back(shape(line));
        }
        std::vector<std::string> got;
        for (const auto& line : split_lines(printed)) {
            got.push_back(shape(line));
        }
        INFO("docs/cli.md:" << e.line << ": $ " << e.command << "\nprinted (exit " << rc << "):\n" << printed);
        CHECK(got == want);
        CHECK((rc != 0) == shows_error(e));
    }
    CHECK(d.wait_exit(std::chrono::seconds(20)).has_value()); // the session ends with `canopy shutdown`
}
