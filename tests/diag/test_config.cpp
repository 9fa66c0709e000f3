#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "diag/config.h"

using standin::diag::Config;
using standin::diag::parse_config;

namespace {

Config parse(const std::map<std::string, std::string> & env) {
    return parse_config([&](const char * name) -> const char * {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

} // namespace

TEST(Config, DefaultsWhenUnset) {
    Config c = parse({});
    EXPECT_EQ(c.host_devices, 1);
    EXPECT_EQ(c.threads, 0);
    EXPECT_TRUE(c.cuda);
    EXPECT_EQ(c.offload_min_batch, 32);
    EXPECT_FALSE(c.debug);
    EXPECT_TRUE(c.warnings.empty());
}

TEST(Config, ValidValues) {
    Config c = parse({{"GGML_STANDIN_HOST_DEVICES", "2"},
                      {"GGML_STANDIN_THREADS", "3"},
                      {"GGML_STANDIN_CUDA", "off"},
                      {"GGML_OP_OFFLOAD_MIN_BATCH", "64"},
                      {"GGML_STANDIN_DEBUG", "TRUE"}});
    EXPECT_EQ(c.host_devices, 2);
    EXPECT_EQ(c.threads, 3);
    EXPECT_FALSE(c.cuda);
    EXPECT_EQ(c.offload_min_batch, 64);
    EXPECT_TRUE(c.debug);
    EXPECT_TRUE(c.warnings.empty());
}

TEST(Config, BadValuesFallBackWithOneWarningEach) {
    Config c = parse({{"GGML_STANDIN_HOST_DEVICES", "9"},
                      {"GGML_STANDIN_THREADS", "4x"},
                      {"GGML_STANDIN_CUDA", "perhaps"},
                      {"GGML_OP_OFFLOAD_MIN_BATCH", "-1"},
                      {"GGML_STANDIN_SCORE", "99999999999999999999"}});
    EXPECT_EQ(c.host_devices, 1);
    EXPECT_EQ(c.threads, 0);
    EXPECT_TRUE(c.cuda);
    EXPECT_EQ(c.offload_min_batch, 32);
    EXPECT_EQ(c.score, 100);
    ASSERT_EQ(c.warnings.size(), 5u);
    EXPECT_NE(c.warnings[0].find("out of range"), std::string::npos);
    EXPECT_NE(c.warnings[1].find("not an integer"), std::string::npos);
    EXPECT_NE(c.warnings[2].find("not a boolean"), std::string::npos);
}

TEST(Config, EmptyValueMeansUnset) {
    Config c = parse({{"GGML_STANDIN_THREADS", ""}});
    EXPECT_EQ(c.threads, 0);
    EXPECT_TRUE(c.warnings.empty());
}

TEST(Config, SummaryNamesEveryValue) {
    std::string s = parse({}).summary();
    for (const char * key : {"host_devices=", "threads=", "cuda=", "offload_min_batch=", "debug=", "score="}) {
        EXPECT_NE(s.find(key), std::string::npos) << key;
    }
}

TEST(Config, HostDiscrete) {
    EXPECT_FALSE(parse({}).host_discrete);
    Config c = parse({{"GGML_STANDIN_HOST_DISCRETE", "1"}});
    EXPECT_TRUE(c.host_discrete);
    EXPECT_NE(c.summary().find("host_discrete=on"), std::string::npos);
    Config bad = parse({{"GGML_STANDIN_HOST_DISCRETE", "sometimes"}});
    EXPECT_FALSE(bad.host_discrete);
    EXPECT_EQ(bad.warnings.size(), 1u);
}

TEST(Config, HostRepackAndIsa) {
    EXPECT_TRUE(parse({}).host_repack);
    EXPECT_EQ(parse({}).host_isa, Config::HostIsa::auto_);
    Config c = parse({{"GGML_STANDIN_HOST_REPACK", "0"}, {"GGML_STANDIN_HOST_ISA", "avx2"}});
    EXPECT_FALSE(c.host_repack);
    EXPECT_EQ(c.host_isa, Config::HostIsa::avx2);
    EXPECT_NE(c.summary().find("host_repack=off"), std::string::npos);
    EXPECT_NE(c.summary().find("host_isa=avx2"), std::string::npos);
    Config bad = parse({{"GGML_STANDIN_HOST_ISA", "sse2"}});
    EXPECT_EQ(bad.host_isa, Config::HostIsa::auto_);
    EXPECT_EQ(bad.warnings.size(), 1u);
}

// GGML_STANDIN_FAULT=perturb:OP names one op exactly; a bare "perturb:" is
// not a fault point.
TEST(Config, PerturbFaultNamesOneOp) {
    Config c = parse({{"GGML_STANDIN_FAULT", "perturb:SOFT_MAX"}});
    EXPECT_TRUE(c.warnings.empty());
    EXPECT_TRUE(c.perturbs("SOFT_MAX"));
    EXPECT_FALSE(c.perturbs("SOFT_MAX_BACK"));
    EXPECT_FALSE(c.perturbs("MUL_MAT"));
    EXPECT_FALSE(c.fault_at("compute"));
    EXPECT_FALSE(parse({{"GGML_STANDIN_FAULT", "compute"}}).perturbs("compute"));
    Config bare = parse({{"GGML_STANDIN_FAULT", "perturb:"}});
    EXPECT_EQ(bare.warnings.size(), 1u);
    EXPECT_FALSE(bare.perturbs(""));
}

// perturb:OP with a name no node can have would plant nothing, silently: it
// is refused with a warning. Unary and GLU names count (ggml_op_desc gives them).
TEST(Config, PerturbOfAnUnknownOpIsAWarning) {
    Config nope = parse({{"GGML_STANDIN_FAULT", "perturb:NOPE"}});
    ASSERT_EQ(nope.warnings.size(), 1u);
    EXPECT_NE(nope.warnings[0].find("'NOPE' is not a ggml op name"), std::string::npos) << nope.warnings[0];
    EXPECT_TRUE(nope.fault.empty());
    for (const char * op : {"perturb:MUL_MAT", "perturb:SILU", "perturb:SWIGLU"}) {
        Config c = parse({{"GGML_STANDIN_FAULT", op}});
        EXPECT_TRUE(c.warnings.empty()) << op;
        EXPECT_EQ(c.fault, op);
    }
}

// Note [config table]: the names parse_config asks the environment for are
// exactly the listed names (but the tools' GGML_STANDIN_SWARM_*, which only
// the tools read), so no variable is read without being known, or known
// without being read; GGML_STANDIN_FUSION is one of them.
TEST(Config, ListedNamesAreTheParsedNames) {
    std::set<std::string> asked;
    parse_config([&](const char * name) -> const char * {
        asked.insert(name);
        return nullptr;
    });
    std::set<std::string> listed;
    for (const char * n : standin::diag::config_var_names()) {
        if (std::string(n).rfind("GGML_STANDIN_SWARM_", 0) != 0) listed.insert(n);
    }
    EXPECT_EQ(asked, listed);
    EXPECT_EQ(listed.count("GGML_STANDIN_FUSION"), 1u);
    EXPECT_EQ(listed.count("GGML_STANDIN_MMQ"), 1u);
}

TEST(Config, MmqAndPdl) {
    Config d = parse({});
    EXPECT_EQ(d.mmq, Config::Mmq::auto_);
    EXPECT_TRUE(d.pdl);
    Config c = parse({{"GGML_STANDIN_MMQ", "all"}, {"GGML_STANDIN_PDL", "0"}});
    EXPECT_EQ(c.mmq, Config::Mmq::all);
    EXPECT_FALSE(c.pdl);
    EXPECT_NE(c.summary().find("mmq=all"), std::string::npos);
    EXPECT_NE(c.summary().find("pdl=off"), std::string::npos);
    Config bad = parse({{"GGML_STANDIN_MMQ", "sometimes"}});
    EXPECT_EQ(bad.mmq, Config::Mmq::auto_);
    ASSERT_EQ(bad.warnings.size(), 1u);
    EXPECT_NE(bad.warnings[0].find("auto|off|all"), std::string::npos);
}

// GGML_STANDIN_FAULT=decline:OP plants a gap for one op, and only that op; it
// is not a perturbation.
TEST(Config, DeclineFaultNamesOneOp) {
    Config c = parse({{"GGML_STANDIN_FAULT", "decline:SQR"}});
    EXPECT_TRUE(c.warnings.empty());
    EXPECT_TRUE(c.declines("SQR"));
    EXPECT_FALSE(c.declines("SQRT"));
    EXPECT_FALSE(c.perturbs("SQR"));
    EXPECT_FALSE(parse({{"GGML_STANDIN_FAULT", "perturb:SQR"}}).declines("SQR"));
    Config bare = parse({{"GGML_STANDIN_FAULT", "decline:"}});
    EXPECT_EQ(bare.warnings.size(), 1u);
    EXPECT_FALSE(bare.declines(""));
}
