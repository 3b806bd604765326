// emul_main.cc: runs one kernel of kernels.cu on the CPU (cuda_emul.h) for
// TestKernelsEmulated. Usage: emul SPEC OUT. SPEC is whitespace-separated tokens:
//   KERNEL GRID BLOCK, then one parameter after another:
//   F n v1..vn  a float buffer (values as float32 bit patterns)   N  a null pointer
//   C n b1..bn  a byte buffer        L n v1..vn  a long long buffer
//   i v  int    f v  float (bit pattern)    l v  long long
//   D hex  a Desc, and  A hex  an AttDesc: the bytes Go's pack methods make (desc.go), so
//   that their layout is checked against the C structs too

// OUT receives every float buffer after the run, one line each, as bit patterns.
#include "cuda_emul.h"
#include "../kernels.cu"

#include <cstdio>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <string>

struct Param {
    char kind;
    std::vector<float> f;
    std::vector<unsigned char> c;
    std::vector<long long> l;
    long long iv = 0;
    float fv = 0;
    Desc d{};
    AttDesc a{};
};

static float bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

struct Args {
    std::vector<Param> p;
    float* F(int i) { return p[i].kind == 'N' ? nullptr : p[i].f.data(); }
    const unsigned char* C(int i) { return p[i].c.data(); }
    const long long* L(int i) { return p[i].l.data(); }
    int I(int i) { return (int)p[i].iv; }
    long long LL(int i) { return p[i].iv; }
    float Fv(int i) { return p[i].fv; }
};

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    std::ifstream in(argv[1]);
    std::string name;
    unsigned grid, block;
    in >> name >> grid >> block;
    Args a;
    std::string k;
    while (in >> k) {
        Param p;
        p.kind = k[0];
        long long n;
        switch (p.kind) {
        case 'F':
            in >> n;
            for (long long j = 0; j < n; j++) {
                uint32_t u;
                in >> u;
                p.f.push_back(bits(u));
            }
            break;
        case 'C':
            in >> n;
            for (long long j = 0; j < n; j++) {
                unsigned u;
                in >> u;
                p.c.push_back((unsigned char)u);
            }
            break;
        case 'L':
            in >> n;
            p.l.resize(n);
            for (auto& v : p.l) in >> v;
            break;
        case 'i':
        case 'l':
            in >> p.iv;
            break;
        case 'f': {
            uint32_t u;
            in >> u;
            p.fv = bits(u);
            break;
        }
        case 'D':
        case 'A': {
            std::string hex;
            in >> hex;
            size_t want = p.kind == 'D' ? sizeof(Desc) : sizeof(AttDesc);
            if (hex.size() != 2 * want) {
                fprintf(stderr, "%c: %zu bytes from Go, the C struct has %zu\n", p.kind, hex.size() / 2, want);
                return 3;
            }
            unsigned char* dst = p.kind == 'D' ? (unsigned char*)&p.d : (unsigned char*)&p.a;
            for (size_t j = 0; j < want; j++) dst[j] = (unsigned char)std::stoi(hex.substr(2 * j, 2), nullptr, 16);
            break;
        }
        case 'N':
            break;
        default:
            fprintf(stderr, "bad token %s\n", k.c_str());
            return 2;
        }
        a.p.push_back(std::move(p));
    }
    std::map<std::string, std::function<void()>> ks = {
        {"zoo_unary", [&] { zoo_unary(a.F(0), a.F(1), a.LL(2), a.I(3), a.Fv(4)); }},
        {"zoo_binary", [&] { zoo_binary(a.F(0), a.F(1), a.F(2), a.LL(3), a.I(4), a.p[5].d); }},
        {"zoo_where", [&] { zoo_where(a.F(0), a.C(1), a.F(2), a.F(3), a.LL(4), a.p[5].d); }},
        {"zoo_copy", [&] { zoo_copy(a.F(0), a.LL(1), a.F(2), a.LL(3), a.LL(4), a.p[5].d); }},
        {"zoo_fill", [&] { zoo_fill(a.F(0), a.LL(1), a.Fv(2)); }},
        {"zoo_gather", [&] { zoo_gather(a.F(0), a.F(1), a.L(2), a.LL(3), a.LL(4), a.LL(5), a.LL(6)); }},
        {"zoo_binary_rows", [&] { zoo_binary_rows(a.F(0), a.F(1), a.F(2), a.F(3), a.LL(4), a.LL(5), a.LL(6), a.I(7), a.I(8), a.I(9)); }},
        {"zoo_to_bf16", [&] { zoo_to_bf16((unsigned short*)a.F(0), a.F(1), a.LL(2), a.I(3)); }},
        {"zoo_unary4", [&] { zoo_unary4(a.F(0), a.F(1), a.LL(2), a.I(3), a.Fv(4)); }},
        {"zoo_layernorm_warp", [&] { zoo_layernorm_warp(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.LL(6), a.LL(7), a.LL(8), a.LL(9), a.Fv(10)); }},
        {"zoo_softmax", [&] { zoo_softmax(a.F(0), a.F(1), a.LL(2), a.LL(3), a.LL(4)); }},
        {"zoo_layernorm", [&] { zoo_layernorm(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.LL(6), a.LL(7), a.LL(8), a.LL(9), a.Fv(10)); }},
        {"zoo_reduce", [&] { zoo_reduce(a.F(0), a.F(1), a.LL(2), a.LL(3), a.I(4), a.p[5].d, a.p[6].d); }},
        {"zoo_attention", [&] { zoo_attention(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.p[6].a); }},
        {"zoo_attention_t32", [&] { zoo_attention_t32(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.p[6].a); }},
        {"zoo_attention_t64", [&] { zoo_attention_t64(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.p[6].a); }},
        {"zoo_attention_bf16_d32", [&] { zoo_attention_bf16_d32(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.p[6].a); }},
        {"zoo_attention_bf16_d64", [&] { zoo_attention_bf16_d64(a.F(0), a.F(1), a.F(2), a.F(3), a.F(4), a.F(5), a.p[6].a); }},
    };
    auto it = ks.find(name);
    if (it == ks.end()) {
        fprintf(stderr, "no kernel %s in the emulator\n", name.c_str());
        return 2;
    }
    zoo_emulate(grid, block, it->second);
    FILE* out = fopen(argv[2], "w");
    for (auto& p : a.p) {
        if (p.kind != 'F') continue;
        for (float f : p.f) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            fprintf(out, "%u ", u);
        }
        fprintf(out, "\n");
    }
    fclose(out);
    return 0;
}
