/* avx2_only.so: run a program on an x86-64 CPU with AVX-512, VNNI or AMX as if it were a plain
 * AVX2 one, so that onnxruntime (which picks its kernels from CPUID) runs its AVX2 kernels and
 * anything reading /proc/cpuinfo sees the same flags. Built and used by scripts/avx2_only.py.
 *
 * CPUID is an unprivileged instruction; Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, where
 * the CPU or hypervisor offers it) turns each one into a SIGSEGV. The handler runs the real CPUID
 * with faulting off for that one instruction, clears the feature bits of AVX-512, AVX-VNNI,
 * AVX512-BF16/FP16 and AMX, and steps over the instruction. /proc/cpuinfo opened through libc's
 * open/fopen is served from a copy without those flags. The CPU's microarchitecture stays what it
 * is: kernel choices are a plain AVX2 CPU's, timings are this CPU's running them.
 *
 * If CPUID faulting is not available the program exits with status 97 before main(). A program
 * that installs its own SIGSEGV handler (Python's faulthandler, gcc's cc1) replaces this one and
 * fails at its next CPUID: run Python without it (pytest -p no:faulthandler). So does a thread
 * that blocks SIGSEGV. Only the exact path "/proc/cpuinfo" is served filtered (lscpu and the
 * like read it otherwise), and glibc's own string routines keep the variants it chose before
 * this library loaded. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int cpuinfo_fd = -1;
static struct stat cpuinfo_stat;
static struct sigaction previous; /* the SIGSEGV action before this library's */

static void on_segv(int sig, siginfo_t *si, void *uc_) {
  greg_t *g = ((ucontext_t *)uc_)->uc_mcontext.gregs;
  const unsigned char *ip = (const unsigned char *)g[REG_RIP];
  /* a faulting CPUID is a general protection fault (SI_KERNEL) at a readable instruction */
  if (si->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
    /* anything else goes to the action before ours: a fault the CPU raised happens again on
     * return, a signal sent by kill() is sent again */
    sigaction(SIGSEGV, &previous, NULL);
    if (si->si_code <= 0) raise(sig);
    return;
  }
  unsigned leaf = (unsigned)g[REG_RAX], sub = (unsigned)g[REG_RCX], a, b, c, d;
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
  __cpuid_count(leaf, sub, a, b, c, d);
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
  if (leaf == 7 && sub == 0) {
    /* EBX: avx512 f dq ifma pf er cd bw vl; ECX: vbmi vbmi2 vnni bitalg vpopcntdq;
     * EDX: 4vnniw 4fmaps vp2intersect amx_bf16 avx512_fp16 amx_tile amx_int8 */
    b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
    c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
    d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && sub == 1) { /* avx_vnni, avx512_bf16, avx_ifma, avx_vnni_int8, ... */
    a = b = c = d = 0;
  }
  g[REG_RAX] = a; g[REG_RBX] = b; g[REG_RCX] = c; g[REG_RDX] = d;
  g[REG_RIP] += 2;
}

static int masked_flag(const char *f, size_t n) {
  static const char *prefixes[] = {"avx512", "amx_", "avx_vnni", "avx_ifma", "avx_ne_convert"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    size_t p = strlen(prefixes[i]);
    if (n >= p && strncmp(f, prefixes[i], p) == 0) return 1;
  }
  return 0;
}

/* /proc/cpuinfo without the masked flags, in a memory file */
static void build_cpuinfo(void) {
  FILE *in = fopen("/proc/cpuinfo", "r");
  if (!in) return;
  int fd = memfd_create("cpuinfo", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) { fclose(in); return; }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, in)) > 0) {
    if (strncmp(line, "model name", 10) == 0 && line[len - 1] == '\n') { /* say so beside every CPU figure */
      (void)!write(fd, line, (size_t)len - 1);
      static const char note[] = " [avx2_only.so: AVX-512/VNNI/AMX hidden]\n";
      (void)!write(fd, note, sizeof note - 1);
      continue;
    }
    if (strncmp(line, "flags", 5) != 0) { (void)!write(fd, line, (size_t)len); continue; }
    char *colon = strchr(line, ':');
    if (!colon) { (void)!write(fd, line, (size_t)len); continue; }
    (void)!write(fd, line, (size_t)(colon + 1 - line));
    for (char *tok = strtok(colon + 1, " \n"); tok; tok = strtok(NULL, " \n"))
      if (!masked_flag(tok, strlen(tok))) { (void)!write(fd, " ", 1); (void)!write(fd, tok, strlen(tok)); }
    (void)!write(fd, "\n", 1);
  }
  free(line);
  fclose(in);
  /* read-only for good: opened again as /proc/self/fd/N, it must not be written through */
  fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  if (fstat(fd, &cpuinfo_stat) == 0) cpuinfo_fd = fd;
}

/* "/proc/cpuinfo" (that exact path) becomes the memory file, while its descriptor is still
 * the one this library made (a program may close descriptors it did not open) */
static const char *redirect(const char *path, char *buf, size_t n) {
  struct stat now;
  if (cpuinfo_fd >= 0 && path && strcmp(path, "/proc/cpuinfo") == 0 && fstat(cpuinfo_fd, &now) == 0 &&
      now.st_dev == cpuinfo_stat.st_dev && now.st_ino == cpuinfo_stat.st_ino) {
    snprintf(buf, n, "/proc/self/fd/%d", cpuinfo_fd);
    return buf;
  }
  return path;
}

/* the mode argument, which open() and openat() take only when they create a file */
#define MODE_ARG(flags, mode)                                       \
  if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
    va_list ap;                                                     \
    va_start(ap, flags);                                            \
    mode = va_arg(ap, mode_t);                                      \
    va_end(ap);                                                     \
  }

#define OPEN_WRAPPER(name)                                                      \
  int name(const char *path, int flags, ...) {                                  \
    static int (*real)(const char *, int, ...);                                 \
    if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
    mode_t mode = 0;                                                            \
    MODE_ARG(flags, mode)                                                       \
    char buf[64];                                                               \
    return real(redirect(path, buf, sizeof buf), flags, mode);                  \
  }
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

#define OPENAT_WRAPPER(name)                                                         \
  int name(int dirfd, const char *path, int flags, ...) {                            \
    static int (*real)(int, const char *, int, ...);                                 \
    if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #name); \
    mode_t mode = 0;                                                                 \
    MODE_ARG(flags, mode)                                                            \
    char buf[64];                                                                    \
    return real(dirfd, redirect(path, buf, sizeof buf), flags, mode);               \
  }
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

/* what _FORTIFY_SOURCE builds call */
int __open_2(const char *path, int flags) { return open(path, flags); }
int __open64_2(const char *path, int flags) { return open64(path, flags); }
int __openat_2(int dirfd, const char *path, int flags) { return openat(dirfd, path, flags); }
int __openat64_2(int dirfd, const char *path, int flags) { return openat64(dirfd, path, flags); }

#define FOPEN_WRAPPER(name)                                                          \
  FILE *name(const char *path, const char *mode) {                                   \
    static FILE *(*real)(const char *, const char *);                                \
    if (!real) real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, #name); \
    char buf[64];                                                                    \
    return real(redirect(path, buf, sizeof buf), mode);                              \
  }
FOPEN_WRAPPER(fopen)
FOPEN_WRAPPER(fopen64)

__attribute__((constructor)) static void avx2_only_init(void) {
  build_cpuinfo();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &previous);
  if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
    static const char msg[] = "avx2_only.so: this CPU or kernel offers no CPUID faulting\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(97);
  }
}
