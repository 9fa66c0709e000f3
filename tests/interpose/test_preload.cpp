// Preload mode's caller classification (interpose/preload.h), on libraries
// every test process has loaded: libc and ggml-base. The end-to-end checks
// (LD_PRELOAD over a linked application) are the interpose.preload.* ctests.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ggml-backend.h"
#include "ggml.h"
#include "interpose/preload.h"

namespace pl = standin::interpose::preload;

namespace {

// A registration-shaped function of ggml-base (no arguments, returns a
// pointer), so entry() has a real definition after this program to find.
const char * kGlobalSym = "ggml_backend_cpu_buffer_type";

const char *       g_built_for = nullptr;
ggml_backend_reg * g_fake_reg  = reinterpret_cast<ggml_backend_reg *>(0x1000);
int                g_builds    = 0;
ggml_backend_reg * fake_build(standin::interpose::RegFn, const char *, const char ** built_for) {
    ++g_builds;
    *built_for = g_built_for;
    return g_fake_reg;
}

} // namespace

TEST(Preload, OwnDefinitionIsTheCallersOwn) {
    // Called from inside libc, libc's own getenv.
    const void * in_libc = reinterpret_cast<const void *>(&std::getenv);
    void * def = pl::own_definition(in_libc, "getenv");
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def, reinterpret_cast<const void *>(&std::getenv));
    EXPECT_EQ(pl::own_definition(in_libc, "ggml_init"), nullptr);  // not libc's
}

TEST(Preload, DefinitionInADependencyIsNotOwn) {
    // ggml-base links libc: its handle finds getenv, but in libc, so a call
    // from ggml-base to getenv is not a self-call.
    const void * in_base = reinterpret_cast<const void *>(&ggml_init);
    EXPECT_EQ(pl::own_definition(in_base, "getenv"), nullptr);
    EXPECT_NE(pl::own_definition(in_base, "ggml_init"), nullptr);
}

TEST(Preload, NoCallerNoOwnDefinition) {
    EXPECT_EQ(pl::own_definition(nullptr, "getenv"), nullptr);
    int on_stack = 0;
    EXPECT_EQ(pl::own_definition(&on_stack, "getenv"), nullptr);  // not in any object
}

TEST(Preload, OnlyLocalDefinition) {
    // libc alone defines getenv (ggml_init would not do: other tests in this
    // process load a second ggml-base, and two definitions give nullptr).
    EXPECT_EQ(pl::only_local_definition("getenv"), reinterpret_cast<const void *>(&std::getenv));
    EXPECT_EQ(pl::only_local_definition("standin_no_such_symbol_anywhere"), nullptr);
}

TEST(Preload, ApplicationCallGetsTheRegistryBuiltForIt) {
    g_builds = 0;
    g_built_for = kGlobalSym;
    EXPECT_EQ(pl::entry(kGlobalSym, nullptr, nullptr, &fake_build), g_fake_reg);
    EXPECT_EQ(g_builds, 1);
}

TEST(Preload, AnotherBackendIsPassedThrough) {
    // The registry exists for another symbol (or another mode built it): the
    // real function's own result, unwrapped.
    for (const char * owner : {static_cast<const char *>("ggml_backend_cuda_reg"), static_cast<const char *>(nullptr)}) {
        g_built_for = owner;
        auto * got = reinterpret_cast<void *>(pl::entry(kGlobalSym, nullptr, nullptr, &fake_build));
        EXPECT_EQ(got, reinterpret_cast<void *>(ggml_backend_cpu_buffer_type()));
    }
}

TEST(Preload, SelfCallIsSentToTheCallersOwnDefinition) {
    // A "call" whose return address is inside ggml-base, for a symbol ggml-base
    // defines: its own definition runs, the registry is not built.
    g_builds = 0;
    g_built_for = kGlobalSym;
    const void * in_base = reinterpret_cast<const void *>(&ggml_init);
    auto * got = reinterpret_cast<void *>(pl::entry(kGlobalSym, nullptr, in_base, &fake_build));
    EXPECT_EQ(got, reinterpret_cast<void *>(ggml_backend_cpu_buffer_type()));
    EXPECT_EQ(g_builds, 0);
}

TEST(Preload, NoDefinitionAnywhereIsNull) {
    EXPECT_EQ(pl::entry("standin_no_such_symbol_anywhere", nullptr, nullptr, &fake_build), nullptr);
}
