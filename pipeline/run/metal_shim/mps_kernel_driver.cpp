// Runs dispatches of a check-kernel shared object on buffers from a file.
//
//   mps_kernel_driver LIB.so --list          one line per kernel, tab-separated:
//                                            host_name line max_threads; then a line
//                                            "error_size N"
//   mps_kernel_driver LIB.so REQUEST OUT     run the runs of REQUEST, write OUT
//
// REQUEST (little-endian): u32 runs; per run: u32 buffers, per buffer u64 size, u8 is the
// TORCH_REPORT_ERROR buffer, size bytes; u32 dispatches, per dispatch u32 kernel, u32 mode,
// u32 size[3], u32 threads per threadgroup[3], u32 schedule, u64 seed, u32 slots, u32
// buffer per slot. OUT per run: u32 status (0 ran, 1 stopped, 2 fault), u32 length and the
// text saying why, u32 length and the reported errors, then per buffer u8 1 and its bytes,
// or u8 0 when they are the bytes REQUEST gave (a kernel's inputs: not written back, which
// halves what a large case writes).
//
// Each buffer ends where an inaccessible page begins, and another comes before it: a read or
// write past either end faults, and the fault names the buffer and the thread.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mps_kernel_abi.h"
#include "mps_kernel_field.h"


namespace {

using CountFn = int (*)();
using InfoFn = const mps_kernel::KernelInfo* (*)(int);
using RunFn = int (*)(int, void* const*, const mps_kernel::Dispatch*);
using OutcomeFn = const mps_kernel::Outcome* (*)();
using ErrorsFn = int (*)(const void*, char*, int);
using StructFn = const mps_kernel::Field* (*)(int, int*);

struct Guarded {
  char* map = nullptr;
  size_t map_size = 0;
  char* data = nullptr;
  uint64_t size = 0;
  bool errors = false;
};

size_t page() {
  static size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

Guarded allocate(uint64_t size) {
  Guarded g;
  g.size = size;
  const size_t padded = (size + 7) / 8 * 8;
  const size_t body = (padded + page() - 1) / page() * page();
  g.map_size = body + 2 * page();
  g.map = static_cast<char*>(mmap(nullptr, g.map_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (g.map == MAP_FAILED) {
    g.map = nullptr;
    return g;
  }
  if (body > 0) {
    mprotect(g.map + page(), body, PROT_READ | PROT_WRITE);
#ifdef MADV_HUGEPAGE
    // a large buffer in 2 MB pages: a few faults instead of one per 4 KB page as it is filled
    madvise(g.map + page(), body, MADV_HUGEPAGE);
#endif
  }
  g.data = g.map + page() + body - padded;
  return g;
}

// The request, mapped read-only: its buffers' bytes are copied out of it, and compared with
// it after the run.
struct Request {
  const char* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  // the next n bytes, or nullptr (and no more) when the request is shorter
  const char* take(size_t n) {
    if (n > size - pos) {
      pos = size;
      return nullptr;
    }
    pos += n;
    return data + pos - n;
  }
  bool read(void* out, size_t n) {
    const char* p = take(n);
    if (p != nullptr && n > 0) {
      memcpy(out, p, n);
    }
    return p != nullptr;
  }
};

bool map_request(const char* path, Request& req) {
  const int fd = open(path, O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
    if (fd >= 0) {
      close(fd);
    }
    return false;
  }
  int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
  flags |= MAP_POPULATE;
#endif
  void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, flags, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    return false;
  }
  req.data = static_cast<const char*>(p);
  req.size = size_t(st.st_size);
  return true;
}

void put_text(FILE* out, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  fwrite(&n, 4, 1, out);
  fwrite(s.data(), 1, n, out);
}

std::string where_fault(const mps_kernel::Outcome& o, const std::vector<Guarded>& bufs) {
  char text[512];
  const char* what = o.signal == 11 ? "an access outside every buffer (SIGSEGV)"
                                    : o.signal == 8 ? "an arithmetic fault (SIGFPE)"
                                                    : "a fault";
  std::string place;
  const char* a = static_cast<const char*>(o.address);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Guarded& g = bufs[i];
    if (g.map == nullptr || a < g.map || a >= g.map + g.map_size) {
      continue;
    }
    const long offset = long(a - g.data);
    snprintf(text, sizeof(text), "%s buffer %zu at byte %ld of %llu", offset < 0 ? "before" : "past the end of",
             i, offset, (unsigned long long)g.size);
    place = text;
  }
  snprintf(text, sizeof(text), "%s%s%s, thread (%u, %u, %u) of threadgroup (%u, %u, %u)", what,
           place.empty() ? "" : ": ", place.c_str(), o.position[0], o.position[1], o.position[2],
           o.group[0], o.group[1], o.group[2]);
  return text;
}

int run_file(void* lib, const char* request, const char* response) {
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "mps_kernel_count"));
  auto run = reinterpret_cast<RunFn>(dlsym(lib, "mps_kernel_run"));
  auto outcome = reinterpret_cast<OutcomeFn>(dlsym(lib, "mps_kernel_outcome"));
  auto errors = reinterpret_cast<ErrorsFn>(dlsym(lib, "mps_kernel_errors"));
  Request in;
  FILE* out = fopen(response, "wb");
  if (!map_request(request, in) || !out) {
    fprintf(stderr, "cannot open %s or %s\n", request, response);
    return 2;
  }
  uint32_t runs = 0;
  if (!in.read(&runs, 4)) {
    fprintf(stderr, "truncated request\n");
    return 2;
  }
  for (uint32_t r = 0; r < runs; ++r) {
    uint32_t nbuf = 0;
    in.read(&nbuf, 4);
    std::vector<Guarded> bufs;
    std::vector<const char*> sent;
    for (uint32_t b = 0; b < nbuf; ++b) {
      uint64_t size = 0;
      uint8_t is_errors = 0;
      in.read(&size, 8);
      in.read(&is_errors, 1);
      Guarded g = allocate(size);
      const char* bytes = in.take(size);
      if (g.map == nullptr || bytes == nullptr) {
        fprintf(stderr, "cannot read or allocate buffer %u of run %u\n", b, r);
        return 2;
      }
      memcpy(g.data, bytes, size);
      g.errors = is_errors != 0;
      bufs.push_back(g);
      sent.push_back(bytes);
    }
    uint32_t ndispatch = 0;
    in.read(&ndispatch, 4);
    uint32_t status = 0;
    std::string why;
    for (uint32_t d = 0; d < ndispatch; ++d) {
      uint32_t kernel = 0, slots = 0;
      mps_kernel::Dispatch dispatch{};
      in.read(&kernel, 4);
      in.read(&dispatch.mode, 4);
      in.read(dispatch.size, 12);
      in.read(dispatch.tptg, 12);
      in.read(&dispatch.schedule, 4);
      in.read(&dispatch.seed, 8);
      in.read(&slots, 4);
      std::vector<void*> args(slots + 1, nullptr);
      for (uint32_t s = 0; s < slots; ++s) {
        uint32_t b = 0;
        in.read(&b, 4);
        args[s] = b < bufs.size() ? bufs[b].data : nullptr;
      }
      if (status != 0) {
        continue;
      }
      if (int(kernel) >= count()) {
        fprintf(stderr, "no kernel %u\n", kernel);
        return 2;
      }
      const int rc = run(int(kernel), args.data(), &dispatch);
      if (rc != 0) {
        status = uint32_t(rc);
        why = rc == 2 ? where_fault(*outcome(), bufs) : std::string(outcome()->message);
      }
    }
    fwrite(&status, 4, 1, out);
    put_text(out, why);
    std::string reported;
    for (const Guarded& g : bufs) {
      if (g.errors) {
        std::vector<char> text(16384);
        const int n = errors(g.data, text.data(), int(text.size()));
        reported.append(text.data(), size_t(n));
      }
    }
    put_text(out, reported);
    for (size_t b = 0; b < bufs.size(); ++b) {
      Guarded& g = bufs[b];
      const uint8_t changed = memcmp(g.data, sent[b], g.size) != 0 ? 1 : 0;
      fwrite(&changed, 1, 1, out);
      if (changed) {
        fwrite(g.data, 1, g.size, out);
      }
      munmap(g.map, g.map_size);
    }
  }
  if (fclose(out) != 0) {
    fprintf(stderr, "cannot write %s\n", response);
    return 2;
  }
  return 0;
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
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "mps_kernel_count"));
  auto info = reinterpret_cast<InfoFn>(dlsym(lib, "mps_kernel_info"));
  auto error_size = reinterpret_cast<CountFn>(dlsym(lib, "mps_kernel_error_size"));
  if (!count || !info || !error_size) {
    fprintf(stderr, "%s has no mps_kernel table\n", argv[1]);
    return 2;
  }
  if (strcmp(argv[2], "--list") == 0) {
    for (int i = 0; i < count(); ++i) {
      const mps_kernel::KernelInfo* k = info(i);
      printf("%s\t%d\t%u\n", k->host_name, k->line, k->max_threads);
    }
    printf("error_size\t%d\n", error_size());
    auto structs = reinterpret_cast<CountFn>(dlsym(lib, "mps_kernel_struct_count"));
    auto one = reinterpret_cast<StructFn>(dlsym(lib, "mps_kernel_struct"));
    for (int i = 0; structs && one && i < structs(); ++i) {
      int rows = 0;
      const mps_kernel::Field* f = one(i, &rows);
      for (int r = 0; r < rows; ++r) {
        printf("field\t%s\t%s\t%u\t%u\t%u\t%c\n", f[r].type, f[r].name, f[r].offset, f[r].size,
               f[r].element, f[r].kind ? f[r].kind : '-');
      }
    }
    return 0;
  }
  if (argc < 4) {
    fprintf(stderr, "usage: %s LIB.so REQUEST OUT\n", argv[0]);
    return 2;
  }
  return run_file(lib, argv[2], argv[3]);
}
