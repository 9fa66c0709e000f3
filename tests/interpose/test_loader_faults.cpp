// The loader's checks before anything of a real library runs
// (interpose/loader.h): damaged ELF files are refused with bad_elf instead of
// dying of SIGBUS inside dlopen, and this very module is refused with
// is_standin (Note [standin as the real library]). The whole-process cases (a
// copy of the plugin, the plugin itself, a truncated libggml-cpu) are the
// ctests interpose.fault.* run by tests/interpose/loader_faults.sh.
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "interpose/loader.h"

using namespace standin;
namespace fs = std::filesystem;

#ifdef STANDIN_FAKE_COMM_LIB
namespace {

std::vector<char> read_all(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A scratch copy of a library, cut to `n` bytes (or patched by `edit`).
class Scratch {
  public:
    explicit Scratch(const std::string & name) {
        dir_ = fs::temp_directory_path() / ("standin-loader-" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        path_ = (dir_ / name).string();
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    const std::string & write(const std::vector<char> & bytes) {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return path_;
    }

  private:
    fs::path    dir_;
    std::string path_;
};

Elf64_Ehdr header_of(const std::vector<char> & b) {
    Elf64_Ehdr h{};
    std::memcpy(&h, b.data(), sizeof(h));
    return h;
}

} // namespace

TEST(LoaderFaults, AWholeLibraryPassesTheElfCheck) {
    std::string why;
    EXPECT_TRUE(interpose::check_elf_file(STANDIN_FAKE_COMM_LIB, why)) << why;
}

// `head -c N` of a real library: dlopen maps the missing pages all the same,
// and the first touch raises SIGBUS. The check names the segment instead.
TEST(LoaderFaults, TruncatedLibraryIsBadElfNotACrash) {
    const std::vector<char> whole = read_all(STANDIN_FAKE_COMM_LIB);
    ASSERT_GT(whole.size(), 4096u);
    Scratch s("libggml-truncated.so");
    const std::string & path = s.write(std::vector<char>(whole.begin(), whole.begin() + whole.size() / 2));

    interpose::RealLibrary r = interpose::load_real_library(path);
    EXPECT_EQ(r.error, interpose::LoadError::bad_elf) << interpose::load_error_name(r.error) << ": " << r.detail;
    EXPECT_STREQ(interpose::load_error_name(r.error), "bad_elf");
    EXPECT_NE(r.detail.find("truncated"), std::string::npos) << r.detail;
    EXPECT_EQ(r.handle, nullptr);
    EXPECT_EQ(r.reg, nullptr);
}

TEST(LoaderFaults, EachKindOfDamageIsNamed) {
    const std::vector<char> whole = read_all(STANDIN_FAKE_COMM_LIB);
    const Elf64_Ehdr        eh    = header_of(whole);
    ASSERT_GT(eh.e_shnum, 0) << "the fake library keeps its section headers";
    struct Case {
        const char *      name;
        std::vector<char> bytes;
        const char *      expect;
    };
    std::vector<Case> cases;
    cases.push_back({"empty", {}, "not an ELF file"});
    cases.push_back({"text", {'h', 'e', 'l', 'l', 'o', '\n'}, "not an ELF file"});
    cases.push_back({"header only", std::vector<char>(whole.begin(), whole.begin() + sizeof(Elf64_Ehdr)),
                     "program header table"});
    // Cut just before the section header table: every segment is whole, the
    // section headers are not.
    cases.push_back({"no section table", std::vector<char>(whole.begin(), whole.begin() + eh.e_shoff), "section header"});
    std::vector<char> exe = whole;
    reinterpret_cast<Elf64_Ehdr *>(exe.data())->e_type = ET_EXEC;
    cases.push_back({"executable", exe, "not a shared library"});
    std::vector<char> narrow = whole;
    narrow[EI_CLASS] = ELFCLASS32;
    cases.push_back({"32-bit", narrow, "not a 64-bit ELF"});
    for (const Case & c : cases) {
        Scratch     s("libggml-damaged.so");
        std::string why;
        EXPECT_FALSE(interpose::check_elf_file(s.write(c.bytes), why)) << c.name;
        EXPECT_NE(why.find(c.expect), std::string::npos) << c.name << ": " << why;
        interpose::RealLibrary r = interpose::load_real_library(s.write(c.bytes));
        EXPECT_EQ(r.error, interpose::LoadError::bad_elf) << c.name << ": " << r.detail;
    }
}

// The file that holds the loader (here the test program, in the plugin the
// module) is refused by identity before it is opened, whatever path names it.
TEST(LoaderFaults, ThisModuleItselfIsStandin) {
    const std::string self = interpose::self_path();
    ASSERT_FALSE(self.empty());
    for (const std::string & path : {self, std::string("/proc/self/exe")}) {
        interpose::RealLibrary r = interpose::load_real_library(path);
        EXPECT_EQ(r.error, interpose::LoadError::is_standin) << path << ": " << r.detail;
        EXPECT_STREQ(interpose::load_error_name(r.error), "is_standin");
        EXPECT_EQ(r.handle, nullptr);
    }
}

#endif
