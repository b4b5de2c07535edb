// The CHORUS_* configuration registry and its parsers.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "base/core/config.hpp"
#include "base/core/error.hpp"

using namespace chorus;

namespace {

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

const ConfigVar& var(std::string_view name) {
  for (const auto& v : config_registry())
    if (v.name == name) return v;
  FAIL("no registry entry " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("parse_bytes", "[config]") {
  CHECK(parse_bytes("0") == 0);
  CHECK(parse_bytes("4096") == 4096);
  CHECK(parse_bytes("64K") == 64 * 1024);
  CHECK(parse_bytes("64k") == 64 * 1024);
  CHECK(parse_bytes("1M") == 1024 * 1024);
  CHECK(parse_bytes("2G") == 2ull * 1024 * 1024 * 1024);
  CHECK(parse_bytes("3T") == 3ull << 40);
  for (const char* bad : {"abc", "-1", "1.5M", "", "K", "M1", "64KiB", "64Ki", " 64K", "64 K",
                          "0x10", "+5", "1e3", "99999999999999999999", "16777216T"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_bytes(bad), UsageError);
  }
}

TEST_CASE("format_bytes", "[config]") {
  CHECK(format_bytes(0) == "0");
  CHECK(format_bytes(1000) == "1000");
  CHECK(format_bytes(65536) == "64K");
  CHECK(format_bytes(1 << 20) == "1M");
  CHECK(format_bytes(3ull << 30) == "3G");
  CHECK(format_bytes(1536) == "1536");
  for (std::size_t b : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20,
                        std::size_t{12345}, std::size_t{5} << 40})
    CHECK(parse_bytes(format_bytes(b)) == b);
}

TEST_CASE("parse_seconds", "[config]") {
  CHECK(parse_seconds("30") == 30.0);
  CHECK(parse_seconds("1.5") == 1.5);
  CHECK(parse_seconds("500ms") == Approx(0.5));
  CHECK(parse_seconds("2m") == 120.0);
  CHECK(parse_seconds("10s") == 10.0);
  CHECK(parse_seconds("1h") == 3600.0);
  CHECK(parse_seconds("250us") == Approx(250e-6));
  CHECK(parse_seconds("0") == 0.0);
  CHECK(parse_seconds("500MS") == Approx(0.5));
  for (const char* bad :
       {"abc", "-1", "", "ms", "5 ms", "1.5x", "nan", "inf", "-inf", "1e400", "1e308h"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_seconds(bad), UsageError);
  }
}

TEST_CASE("parse_int and parse_bool", "[config]") {
  CHECK(parse_int("12") == 12);
  CHECK(parse_int("-3") == -3);
  CHECK(parse_int("9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", "abc", "1e3", "1.0", "12 ", "9223372036854775808"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_int(bad), UsageError);
  }
  for (const char* yes : {"1", "true", "TRUE", "yes", "on"}) CHECK(parse_bool(yes));
  for (const char* no : {"0", "false", "No", "off"}) CHECK_FALSE(parse_bool(no));
  CHECK_THROWS_AS(parse_bool("maybe"), UsageError);
  CHECK_THROWS_AS(parse_bool(""), UsageError);
}

TEST_CASE("load_config reads registered variables from an env map", "[config]") {
  const Config c = load_config(map_env({
      {"CHORUS_RANK", "3"},
      {"CHORUS_WORLD_SIZE", "8"},
      {"CHORUS_LOCAL_RANK", "1"},
      {"CHORUS_LOCAL_SIZE", "2"},
      {"CHORUS_STORE_ADDR", "10.0.0.1:29500"},
      {"CHORUS_JOB_TOKEN", "s3cret"},
      {"CHORUS_LOG_LEVEL", "WARNING"},
      {"CHORUS_TIMEOUT", "500ms"},
      {"CHORUS_CONNECT_TIMEOUT", "2m"},
      {"CHORUS_SEGMENT_SIZE", "64K"},
      {"CHORUS_SPIN_US", "0"},
      {"CHORUS_TRANSPORT", "TCP"},
      {"CHORUS_ALGO", "allreduce:0-64K:ring"},
      {"CHORUS_TCP_SOCKET_BUFFER", "1M"},
      {"CHORUS_TCP_ZERO_COPY_MIN", ""},  // empty: the default
      {"NOT_CHORUS", "ignored"},
  }));
  CHECK(c.rank == 3);
  CHECK(c.world_size == 8);
  CHECK(c.local_rank == 1);
  CHECK(c.local_size == 2);
  CHECK(c.store_addr == "10.0.0.1:29500");
  CHECK(c.job_token == "s3cret");
  CHECK(c.log_level == "warn");
  CHECK(c.timeout_s == Approx(0.5));
  CHECK(c.connect_timeout_s == 120.0);
  CHECK(c.segment_bytes == 65536);
  CHECK(c.spin_us == 0);
  CHECK(c.transport == "tcp");
  CHECK(c.algo == "allreduce:0-64K:ring");
  CHECK(c.tcp_socket_buffer == (1u << 20));
  CHECK(c.tcp_zero_copy_min == Config{}.tcp_zero_copy_min);
  CHECK(c.host_id.empty());

  const Config d = load_config(map_env({}));
  const Config defaults;
  CHECK(d.rank == defaults.rank);
  CHECK(d.timeout_s == defaults.timeout_s);
  CHECK(d.segment_bytes == defaults.segment_bytes);
  CHECK(d.log_level == defaults.log_level);
}

TEST_CASE("a bad value names the variable and the value", "[config]") {
  const std::map<std::string, std::string> bad[] = {
      {{"CHORUS_TIMEOUT", "abc"}},
      {{"CHORUS_TIMEOUT", "0"}},
      {{"CHORUS_TIMEOUT", "nan"}},
      {{"CHORUS_CONNECT_TIMEOUT", "-5"}},
      {{"CHORUS_SEGMENT_SIZE", "4"}},
      {{"CHORUS_SEGMENT_SIZE", "1.5M"}},
      {{"CHORUS_RING_ROUND", "32"}},
      {{"CHORUS_RING_ROUND", "never"}},
      {{"CHORUS_RANK", "x"}},
      {{"CHORUS_RANK", "-2"}},
      {{"CHORUS_WORLD_SIZE", "4294967297"}},  // would wrap to 1 as an int
      {{"CHORUS_WORLD_SIZE", "-1"}},
      {{"CHORUS_SPIN_US", "-5"}},
      {{"CHORUS_TRANSPORT", "udp"}},
      {{"CHORUS_LOG_LEVEL", "loud"}},
      {{"CHORUS_TCP_SOCKET_BUFFER", "lots"}},
  };
  for (const auto& env : bad) {
    const auto& [name, value] = *env.begin();
    INFO(name << "=" << value);
    const std::string what = usage_error_of([&] { load_config(map_env(env)); });
    CHECK_FALSE(what.empty());
    CHECK_THAT(what, Catch::Contains(name));
    CHECK_THAT(what, Catch::Contains(value));
  }
  // The error code maps to the C API's invalid-argument result.
  try {
    load_config(map_env({{"CHORUS_TIMEOUT", "abc"}}));
    FAIL("no exception");
  } catch (const UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_INVALID_ARGUMENT);
  }
}

TEST_CASE("config registry: names, docs, defaults", "[config]") {
  const auto reg = config_registry();
  REQUIRE(reg.size() >= 10);
  std::set<std::string> names;
  const Config defaults;
  for (const auto& v : reg) {
    INFO(v.name);
    REQUIRE(v.name != nullptr);
    const std::string name = v.name;
    CHECK(name.rfind("CHORUS_", 0) == 0);
    CHECK(name.size() > 7);
    for (char c : name) CHECK(((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'));
    CHECK(names.insert(name).second);  // unique
    REQUIRE(v.doc != nullptr);
    CHECK(std::string(v.doc).size() >= 10);
    REQUIRE(v.default_value != nullptr);
    CHECK(v.parse);
    CHECK(v.show);
    // The documented default is what Config holds by default...
    CHECK(v.show(defaults) == v.default_value);
    // ...and parses back to the same value.
    if (*v.default_value != '\0') {
      Config c;
      v.parse(c, v.default_value);
      CHECK(v.show(c) == v.default_value);
    }
  }
  for (const char* expected :
       {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE",
        "CHORUS_STORE_ADDR", "CHORUS_JOB_TOKEN", "CHORUS_TIMEOUT", "CHORUS_LOG_LEVEL"})
    CHECK(names.count(expected) == 1);
  // show() reflects a parsed value.
  Config c;
  var("CHORUS_SEGMENT_SIZE").parse(c, "256K");
  CHECK(var("CHORUS_SEGMENT_SIZE").show(c) == "256K");
  var("CHORUS_TIMEOUT").parse(c, "90s");
  CHECK(var("CHORUS_TIMEOUT").show(c) == "90");
}

TEST_CASE("CHORUS_RING_ROUND: auto, off or a size", "[config]") {
  Config c;
  CHECK_FALSE(c.ring_round_bytes.has_value());
  CHECK(var("CHORUS_RING_ROUND").show(c) == "auto");
  var("CHORUS_RING_ROUND").parse(c, "2M");
  CHECK(c.ring_round_bytes == std::optional<std::size_t>(2u << 20));
  CHECK(var("CHORUS_RING_ROUND").show(c) == "2M");
  var("CHORUS_RING_ROUND").parse(c, "OFF");
  CHECK(c.ring_round_bytes == std::optional<std::size_t>(0));
  CHECK(var("CHORUS_RING_ROUND").show(c) == "off");
  var("CHORUS_RING_ROUND").parse(c, "0");
  CHECK(c.ring_round_bytes == std::optional<std::size_t>(0));
  var("CHORUS_RING_ROUND").parse(c, "auto");
  CHECK_FALSE(c.ring_round_bytes.has_value());
}

TEST_CASE("process_env and map_env lookups", "[config]") {
  const char* name = "CHORUS_UNIT_TEST_ONLY_VARIABLE";
  ::unsetenv(name);
  CHECK_FALSE(process_env()(name).has_value());
  ::setenv(name, "hello", 1);
  CHECK(process_env()(name) == std::optional<std::string>("hello"));
  ::unsetenv(name);
  auto env = map_env({{"A", "1"}, {"B", ""}});
  CHECK(env("A") == std::optional<std::string>("1"));
  CHECK(env("B") == std::optional<std::string>(""));
  CHECK_FALSE(env("C").has_value());
}

TEST_CASE("CHORUS_SPIN_US: auto spins only while every rank has a core", "[config]") {
  using namespace chorus;
  CHECK(load_config(map_env({})).spin_us == -1);
  CHECK(load_config(map_env({{"CHORUS_SPIN_US", "auto"}})).spin_us == -1);
  CHECK(load_config(map_env({{"CHORUS_SPIN_US", "7"}})).spin_us == 7);
  CHECK(resolve_spin_us(7) == 7);
  CHECK(resolve_spin_us(0) == 0);
  CHECK(resolve_spin_us(-1) == 50);
}

TEST_CASE("CHORUS_WAIT_YIELD and CHORUS_WAIT_SLICE_US: how a wait polls", "[config][wait]") {
  using namespace chorus;
  const Config defaults = load_config(map_env({}));
  // auto: a yield at every check only when ranks outnumber cores.
  CHECK_FALSE(wait_spin(defaults, false).yield_each);
  CHECK(wait_spin(defaults, true).yield_each);
  CHECK(wait_spin(defaults, false).us == 50);
  CHECK(wait_spin(defaults, true).slice_us == 100);
  const Config always = load_config(map_env({{"CHORUS_WAIT_YIELD", "Always"}}));
  CHECK(wait_spin(always, false).yield_each);
  const Config never = load_config(map_env({{"CHORUS_WAIT_YIELD", "never"}}));
  CHECK_FALSE(wait_spin(never, true).yield_each);
  const Config custom =
      load_config(map_env({{"CHORUS_WAIT_SLICE_US", "0"}, {"CHORUS_SPIN_US", "7"}}));
  CHECK(wait_spin(custom, true).slice_us == 0);
  CHECK(wait_spin(custom, true).us == 7);
  CHECK(load_config(map_env({{"CHORUS_WAIT_SLICE_US", "100000"}})).wait_slice_us == 100000);
  for (const char* bad : {"50", "100001", "-1", "soon"}) {
    INFO("CHORUS_WAIT_SLICE_US=" << bad);
    CHECK_THAT(usage_error_of([&] {
                 load_config(map_env({{"CHORUS_WAIT_SLICE_US", bad}}));
               }),
               Catch::Contains("CHORUS_WAIT_SLICE_US"));
  }
  CHECK_THAT(usage_error_of([] {
               load_config(map_env({{"CHORUS_WAIT_YIELD", "sometimes"}}));
             }),
             Catch::Contains("sometimes"));
}

TEST_CASE("CHORUS_WIRE_DTYPE: none, bf16, f16", "[config][wire]") {
  CHECK_FALSE(load_config(map_env({})).wire_dtype.has_value());
  CHECK_FALSE(load_config(map_env({{"CHORUS_WIRE_DTYPE", "none"}})).wire_dtype.has_value());
  CHECK(load_config(map_env({{"CHORUS_WIRE_DTYPE", "bf16"}})).wire_dtype == DataType::bf16);
  CHECK(load_config(map_env({{"CHORUS_WIRE_DTYPE", "BFloat16"}})).wire_dtype == DataType::bf16);
  CHECK(load_config(map_env({{"CHORUS_WIRE_DTYPE", "f16"}})).wire_dtype == DataType::f16);
  CHECK(load_config(map_env({{"CHORUS_WIRE_DTYPE", "fp16"}})).wire_dtype == DataType::f16);
  const std::string what = usage_error_of([] {
    load_config(map_env({{"CHORUS_WIRE_DTYPE", "int8"}}));
  });
  CHECK(what.find("CHORUS_WIRE_DTYPE") != std::string::npos);
  CHECK(what.find("int8") != std::string::npos);
  Config c;
  var("CHORUS_WIRE_DTYPE").parse(c, "f16");
  CHECK(var("CHORUS_WIRE_DTYPE").show(c) == "f16");
}

TEST_CASE("CHORUS_CHECK_REPLICAS: a step interval, 0 for never", "[config]") {
  CHECK(load_config(map_env({})).check_replicas == 0);
  CHECK(load_config(map_env({{"CHORUS_CHECK_REPLICAS", "100"}})).check_replicas == 100);
  const std::string what = usage_error_of([] {
    load_config(map_env({{"CHORUS_CHECK_REPLICAS", "-1"}}));
  });
  CHECK(what.find("CHORUS_CHECK_REPLICAS") != std::string::npos);
  CHECK(what.find("out of range") != std::string::npos);
}

TEST_CASE("CHORUS_NET_*: set or default; CHORUS_LINK_PROBE", "[config]") {
  const Config defaults = load_config(map_env({}));
  CHECK_FALSE(defaults.net_given);
  CHECK(defaults.link_probe);
  CHECK(defaults.net_gbps == 10);
  // Set to the default value, it still counts as set: the user chose it.
  CHECK(load_config(map_env({{"CHORUS_NET_GBPS", "10"}})).net_given);
  const Config alpha = load_config(map_env({{"CHORUS_NET_ALPHA_US", "75"}}));
  CHECK(alpha.net_given);
  CHECK(alpha.net_alpha_us == 75);
  CHECK_FALSE(load_config(map_env({{"CHORUS_LINK_PROBE", "off"}})).link_probe);
  CHECK(var("CHORUS_LINK_PROBE").show(defaults) == "1");
  CHECK_THROWS_AS(load_config(map_env({{"CHORUS_LINK_PROBE", "maybe"}})), UsageError);
  CHECK_THROWS_AS(load_config(map_env({{"CHORUS_NET_GBPS", "-1"}})), UsageError);
}

TEST_CASE("CHORUS_AGREE: every call, none, or from a size", "[config]") {
  const Config defaults = load_config(map_env({}));
  CHECK(defaults.agree_min_bytes == 256 * 1024);
  CHECK_FALSE(defaults.agrees(256 * 1024 - 1));
  CHECK(defaults.agrees(256 * 1024));
  CHECK(var("CHORUS_AGREE").show(defaults) == "256K");
  const Config every = load_config(map_env({{"CHORUS_AGREE", "on"}}));
  CHECK(every.agrees(0));  // a barrier too
  CHECK(var("CHORUS_AGREE").show(every) == "1");
  const Config none = load_config(map_env({{"CHORUS_AGREE", "0"}}));
  CHECK_FALSE(none.agrees(uint64_t{1} << 40));
  CHECK(var("CHORUS_AGREE").show(none) == "0");
  CHECK(load_config(map_env({{"CHORUS_AGREE", "4K"}})).agree_min_bytes == 4096);
  const std::string what = usage_error_of([] {
    load_config(map_env({{"CHORUS_AGREE", "sometimes"}}));
  });
  CHECK(what.find("CHORUS_AGREE") != std::string::npos);
}

TEST_CASE("CHORUS_KEEP_RESULT: a size up to 1M, 0 for none", "[config]") {
  const Config defaults = load_config(map_env({}));
  CHECK(defaults.keep_result_bytes == 128 * 1024);
  CHECK(var("CHORUS_KEEP_RESULT").show(defaults) == "128K");
  CHECK(load_config(map_env({{"CHORUS_KEEP_RESULT", "256K"}})).keep_result_bytes == 256 * 1024);
  CHECK(load_config(map_env({{"CHORUS_KEEP_RESULT", "0"}})).keep_result_bytes == 0);
  const std::string what = usage_error_of([] {
    load_config(map_env({{"CHORUS_KEEP_RESULT", "2M"}}));
  });
  CHECK(what.find("at most 1M") != std::string::npos);
}
