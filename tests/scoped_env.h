#pragma once
// ScopedEnv: sets an environment variable for one scope and restores what it was (or unsets it). A process forked
// meanwhile (the Supervisor's zygote, and every worker after it) inherits the value of that moment.
// Not thread safe: setenv and getenv race with any other thread that reads the environment.

#include <cstdlib>
#include <optional>
#include <string>

namespace canopy::testing {

class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) {
            old_ = old;
        }
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) {
            ::setenv(name_, old_->c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

} // namespace canopy::testing
