// The request format: valid requests parse, every malformed one is a
// bad_request naming the problem, and bounded fuzzing finds no other outcome.
#include <random>

#include <gtest/gtest.h>

#include "tools/swarm/protocol.h"

namespace {

using standin::swarm::Op;
using standin::swarm::parse_request;
using standin::swarm::ProtocolError;
using nlohmann::json;

std::string bad_request_message(const std::string & line) {
    try {
        parse_request(line);
    } catch (const ProtocolError & e) {
        EXPECT_EQ(e.code, "bad_request") << line;
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << line;
    return {};
}

TEST(SwarmProtocol, ParsesASubmit) {
    auto r = parse_request(R"({"v":1,"op":"submit","name":"nightly","cwd":"/tmp","jobs":[
        {"kind":"conformance","device":"STANDIN_HOST0","args":["-o","ADD"],"timeout_s":60},
        {"kind":"command","args":["echo","hi"],"env":{"A_B":"1"},"name":"hello"}]})");
    EXPECT_EQ(r.op, Op::submit);
    EXPECT_EQ(r.submit.name, "nightly");
    ASSERT_EQ(r.submit.jobs.size(), 2u);
    EXPECT_EQ(r.submit.jobs[0].device, "STANDIN_HOST0");
    EXPECT_EQ(r.submit.jobs[0].timeout_s, 60);
    EXPECT_EQ(r.submit.jobs[1].device, "any");
    EXPECT_EQ(r.submit.jobs[1].env.at("A_B"), "1");
    // The client's encoder and the daemon's parser agree.
    auto again = parse_request(standin::swarm::request_to_json(r).dump());
    EXPECT_EQ(again.submit.jobs[1].args, r.submit.jobs[1].args);
    EXPECT_EQ(again.submit.jobs[0].timeout_s, 60);
}

TEST(SwarmProtocol, ParsesControlRequests) {
    EXPECT_EQ(parse_request(R"({"op":"ping"})").op, Op::ping);
    auto l = parse_request(R"({"op":"logs","session":7,"job":2,"follow":true,"after":10})");
    EXPECT_EQ(l.session, 7);
    EXPECT_EQ(*l.job, 2);
    EXPECT_TRUE(l.follow);
    EXPECT_EQ(l.after, 10);
    auto ls = parse_request(R"({"op":"ls","ids":true,"state":"done","limit":5})");
    EXPECT_TRUE(ls.ids_only);
    EXPECT_EQ(ls.state, "done");
    EXPECT_FALSE(parse_request(R"({"op":"cancel","session":3})").job.has_value());
}

TEST(SwarmProtocol, RejectsMalformedRequestsWithAClearMessage) {
    EXPECT_NE(bad_request_message("not json").find("not valid JSON"), std::string::npos);
    EXPECT_NE(bad_request_message("[1,2]").find("JSON object"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"launch"})").find("unknown op 'launch'"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"ping","extra":1})").find("unknown field 'extra'"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"ping","v":2})").find("'v'"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"show"})").find("missing field 'session'"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"show","session":"1"})").find("must be an integer"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"show","session":0})").find("out of range"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"show","session":18446744073709551615})").find("out of range"),
              std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"cancel","session":1,"job":0})").find("'job'"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"ls","state":"sleeping"})").find("unknown state"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[]})").find("non-empty"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","jobs":[{"kind":"command","args":["a"]}]})").find("'name'"),
              std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","cwd":"rel","jobs":[{"kind":"command","args":["a"]}]})")
                  .find("absolute"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"command"}]})").find("needs args"),
              std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"command","args":["a",1]}]})")
                  .find("array of strings"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"command","args":["a\u0000b"]}]})")
                  .find("NUL"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"co mmand","args":["a"]}]})")
                  .find("not a valid name"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"bench","device":"../x"}]})")
                  .find("device"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"bench","timeout_s":-1}]})")
                  .find("timeout_s"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"bench","env":{"1X":"a"}}]})")
                  .find("env"), std::string::npos);
    EXPECT_NE(bad_request_message(R"({"op":"submit","name":"x","jobs":[{"kind":"bench","colour":"red"}]})")
                  .find("job 1: unknown field 'colour'"), std::string::npos);
    EXPECT_NE(bad_request_message("{\"op\":\"submit\",\"name\":\"a\\nb\",\"jobs\":[{\"kind\":\"bench\"}]}")
                  .find("control character"), std::string::npos);
}

TEST(SwarmProtocol, EnforcesSizeLimits) {
    json j = {{"op", "submit"}, {"name", "x"}, {"jobs", json::array()}};
    for (std::size_t i = 0; i <= standin::swarm::kMaxJobs; ++i) j["jobs"].push_back({{"kind", "bench"}});
    EXPECT_NE(bad_request_message(j.dump()).find("more than"), std::string::npos);
    json big = {{"op", "submit"}, {"name", std::string(standin::swarm::kMaxNameBytes + 1, 'n')},
                {"jobs", {{{"kind", "bench"}}}}};
    EXPECT_NE(bad_request_message(big.dump()).find("longer than"), std::string::npos);
}

// Bounded fuzzing: mutations of valid requests and random bytes. Every input
// either parses or is a ProtocolError; nothing else escapes, nothing crashes.
TEST(SwarmProtocol, FuzzedRequestsNeverEscapeAsOtherErrors) {
    const std::vector<std::string> seeds = {
        R"({"op":"submit","name":"n","cwd":"/tmp","jobs":[{"kind":"command","device":"any","args":["echo","x"],"timeout_s":1.5,"env":{"K":"v"}}]})",
        R"({"op":"logs","session":1,"job":1,"follow":true,"after":0})",
        R"({"op":"ls","ids":true,"state":"running","limit":3})",
        R"({"op":"cancel","session":2})",
    };
    const std::string alphabet = "{}[]\":,0123456789-+.eEtrufalsn \\u00ff\x01\x80";
    std::mt19937      rng(12345);
    int               parsed = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string s = seeds[rng() % seeds.size()];
        int         edits = 1 + static_cast<int>(rng() % 8);
        for (int e = 0; e < edits && !s.empty(); ++e) {
            std::size_t at = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[at] = alphabet[rng() % alphabet.size()]; break;
                case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
                case 2: s.erase(at, 1 + rng() % 4); break;
                default: s.insert(at, s.substr(rng() % s.size(), rng() % 16)); break;
            }
        }
        if (iter % 10 == 0) {  // pure noise
            s.resize(rng() % 64);
            for (char & c : s) c = static_cast<char>(rng());
        }
        try {
            parse_request(s);
            ++parsed;
        } catch (const ProtocolError & e) {
            EXPECT_EQ(e.code, "bad_request");
            ++rejected;
        } catch (const std::exception & e) {
            ADD_FAILURE() << "unexpected exception " << e.what() << " for: " << s;
        }
    }
    EXPECT_EQ(parsed + rejected, 20000);
    EXPECT_GT(rejected, 10000);  // the mutations do reach the validator
}

TEST(SwarmProtocol, DeepNestingIsRejectedNotACrash) {
    std::string deep = "{\"op\":\"ping\",\"x\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
    EXPECT_NE(bad_request_message(deep).find("unknown field"), std::string::npos);
}

TEST(SwarmProtocol, RepliesAreOneLineEvenWithInvalidUtf8) {
    json j = standin::swarm::ok_reply();
    j["line"] = std::string("bad \xff\xfe bytes\nand a newline");
    std::string line = standin::swarm::to_line(j);
    EXPECT_EQ(line.find('\n'), line.size() - 1);
    EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded());
}

} // namespace
