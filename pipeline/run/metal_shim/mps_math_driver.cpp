// Runs the registrations of one functor's shared object on inputs from a file.
//
//   mps_math_driver LIB.so --list          one line per registration, tab-separated:
//                                          kernel input output result alpha arity
//                                          in_size out_size alpha_size line
//   mps_math_driver LIB.so REQUEST OUT     run the jobs of REQUEST, write OUT
//
// REQUEST (little-endian): u32 jobs, then per job u32 registration, u32 n, the arity input
// blocks of n * in_size bytes, and alpha_size bytes of alpha. OUT per job: n * out_size bytes
// of results, then n status bytes: 0, or the signal that stopped that element (SIGFPE for an
// integer division by zero...). Each element runs under its own sigsetjmp, so a fault is
// the finding of one input and the others still run.
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mps_abi.h"

namespace {

sigjmp_buf g_jump;

void on_fault(int sig) {
  siglongjmp(g_jump, sig);
}

bool read_all(FILE* f, void* p, size_t n) {
  return n == 0 || fread(p, 1, n, f) == n;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB.so (--list | REQUEST OUT)\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  using CountFn = int (*)();
  using GetFn = const mps_math::Registration* (*)(int);
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "mps_math_count"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "mps_math_registration"));
  if (!count || !get) {
    fprintf(stderr, "%s has no mps_math registrations table\n", argv[1]);
    return 2;
  }
  const int n_regs = count();
  if (strcmp(argv[2], "--list") == 0) {
    for (int i = 0; i < n_regs; ++i) {
      const mps_math::Registration* r = get(i);
      printf(
          "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n",
          r->name,
          r->input,
          r->output,
          r->result,
          r->alpha,
          r->arity,
          r->in_size,
          r->out_size,
          r->alpha_size,
          r->line);
    }
    return 0;
  }
  if (argc < 4) {
    fprintf(stderr, "usage: %s LIB.so REQUEST OUT\n", argv[0]);
    return 2;
  }
  FILE* in = fopen(argv[2], "rb");
  FILE* out = fopen(argv[3], "wb");
  if (!in || !out) {
    fprintf(stderr, "cannot open %s or %s\n", argv[2], argv[3]);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fault;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  for (int sig : {SIGFPE, SIGSEGV, SIGBUS, SIGILL}) {
    sigaction(sig, &sa, nullptr);
  }
  uint32_t jobs = 0;
  if (!read_all(in, &jobs, 4)) {
    fprintf(stderr, "truncated request\n");
    return 2;
  }
  for (uint32_t j = 0; j < jobs; ++j) {
    uint32_t index = 0, n = 0;
    if (!read_all(in, &index, 4) || !read_all(in, &n, 4) || int(index) >= n_regs) {
      fprintf(stderr, "bad job %u\n", j);
      return 2;
    }
    const mps_math::Registration* r = get(int(index));
    std::vector<std::vector<unsigned char>> inputs(r->arity);
    for (auto& block : inputs) {
      block.resize(size_t(n) * r->in_size + 16);
      if (!read_all(in, block.data(), size_t(n) * r->in_size)) {
        fprintf(stderr, "truncated inputs in job %u\n", j);
        return 2;
      }
    }
    std::vector<unsigned char> alpha(r->alpha_size + 16);
    if (!read_all(in, alpha.data(), r->alpha_size)) {
      fprintf(stderr, "truncated alpha in job %u\n", j);
      return 2;
    }
    std::vector<unsigned char> results(size_t(n) * r->out_size + 16, 0);
    std::vector<unsigned char> status(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      const void* args[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < r->arity; ++k) {
        args[k] = inputs[k].data() + size_t(i) * r->in_size;
      }
      void* dst = results.data() + size_t(i) * r->out_size;
      const int sig = sigsetjmp(g_jump, 1);
      if (sig == 0) {
        r->run(dst, args, alpha.data());
      } else {
        status[i] = static_cast<unsigned char>(sig);
      }
    }
    fwrite(results.data(), 1, size_t(n) * r->out_size, out);
    fwrite(status.data(), 1, n, out);
  }
  fclose(out);
  return 0;
}
